"""e2e: a real kubelet pulls images from a real docker-registry and runs them under bubblewrap.

The images are built by the test from the host's busybox-static and files
the host does not have, so what a container prints proves whose files it
sees. Driven through the official client and kubectl against a real API
server, as a user would.
"""

from __future__ import annotations

import base64
import json
import os
from typing import Iterator

import pytest

from tests.kubelet.conftest import Node, phase, pod_manifest, start_node, waiting_reason
from tests.support.kube import official_client
from tests.support.oci_registry import Registry, busybox_layer, image, tar_layer

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the kubelet runs OCI containers on an overlay rootfs")

MARKER = "ID=k8py-oci-test\nPRETTY_NAME=\"k8py test image\"\n"


@pytest.fixture(scope="module")
def oci_node(tmp_path_factory, registry: Registry) -> Iterator[Node]:
    tmp = str(tmp_path_factory.mktemp("oci-node"))
    server, kubelet, kubectl = start_node(tmp, name="oci-node", extra=("--minimum-image-gc-age", "0"))
    api = official_client(server.url)
    try:
        yield Node(server, kubelet, kubectl, api)
    finally:
        api.close()
        kubelet.stop()
        kubelet.kill_containers()
        server.stop()


@pytest.fixture(scope="module")
def app_image(registry: Registry) -> str:
    img = image([busybox_layer({"etc/os-release": MARKER}),
                 tar_layer([("srv", None), ("srv/hello.txt", "hello from the image\n")])],
                entrypoint=["/bin/sh", "-c"], cmd=["cat /etc/os-release; echo cwd=$(pwd) greeting=$GREETING; sleep 3600"],
                env=["PATH=/bin", "GREETING=from-image", "ONLY_IMAGE=1"], working_dir="/srv")
    return registry.push("k8py/app", "1.0", img)


def _ns(node: Node, name: str) -> str:
    node.core.create_namespace({"metadata": {"name": name}})
    return name


def _logs(node: Node, ns: str, pod: str) -> str:
    return node.core.read_namespaced_pod_log(pod, ns)


def _wait_log(node: Node, ns: str, pod: str, needle: str, timeout: float = 60) -> str:
    import time
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        try:
            text = _logs(node, ns, pod)
        except Exception:
            text = ""
        if needle in text:
            return text
        time.sleep(0.2)
    raise AssertionError(f"{needle!r} never showed in the log of {ns}/{pod}: {text!r}\n" + "".join(list(node.kubelet.output)[-30:]))


def test_a_pod_from_a_pulled_image_sees_the_images_files_not_the_hosts(oci_node: Node, app_image: str) -> None:
    ns = _ns(oci_node, "oci-files")
    oci_node.kubectl.run("apply", "-n", ns, "-f", "-", input=json.dumps(pod_manifest("app", [{
        "name": "app", "image": app_image, "env": [{"name": "GREETING", "value": "from-pod"}]}], node_name="oci-node")))
    pod = oci_node.wait_pod(ns, "app", phase("Running"), what="Running")
    text = _wait_log(oci_node, ns, "app", "cwd=")
    assert MARKER in text  # the image's os-release, not Debian's
    assert "cwd=/srv greeting=from-pod" in text  # WorkingDir from the image, env from the pod over the image's
    cs = pod["status"]["containerStatuses"][0]
    repo = app_image.rsplit(":", 1)[0]
    assert cs["image"] == app_image and cs["imageID"].startswith(f"{repo}@sha256:")
    out = oci_node.kubectl.run("exec", "-n", ns, "app", "--", "sh", "-c", "cat /srv/hello.txt; echo $ONLY_IMAGE; ls /usr 2>&1 | head -1; "
                                                                           "echo x > /written && cat /written").stdout
    lines = out.splitlines()
    assert lines[0] == "hello from the image" and lines[1] == "1"
    assert "No such file" in lines[2] or lines[2] == ""  # the host's /usr is not there
    assert lines[-1] == "x"  # the root is writable (an overlay of the container's own)
    reasons = [e["reason"] for e in oci_node.events(ns, "app")]
    assert "Pulling" in reasons and "Pulled" in reasons
    node = json.loads(oci_node.kubectl.run("get", "node", "oci-node", "-o", "json").stdout)
    import time
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not any(app_image in i["names"] for i in node["status"].get("images") or []):
        time.sleep(0.5)
        node = json.loads(oci_node.kubectl.run("get", "node", "oci-node", "-o", "json").stdout)
    entry = next(i for i in node["status"]["images"] if app_image in i["names"])
    assert cs["imageID"] in entry["names"] and entry["sizeBytes"] > 100_000
