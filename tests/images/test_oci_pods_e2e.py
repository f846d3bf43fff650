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
from typing import Callable, Iterator

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
    events = "".join(f"{e.get('lastTimestamp')} {e['reason']}: {e['message']}\n" for e in node.events(ns, pod))
    raise AssertionError(f"{needle!r} never showed in the log of {ns}/{pod}: {text!r}\n{events}" + "".join(list(node.kubelet.output)[-30:]))


def _wait_event(node: Node, ns: str, pod: str, check: Callable[[dict], bool], timeout: float = 60) -> None:
    """Events are written asynchronously (the recorder batches them): wait for the one wanted."""
    import time
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        events = node.events(ns, pod)
        if any(check(e) for e in events):
            return
        time.sleep(0.3)
    raise AssertionError(f"no such event for {ns}/{pod}: " + "; ".join(f"{e['reason']}: {e['message']}" for e in events))


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
    _wait_event(oci_node, ns, "app", lambda e: e["reason"] == "Pulling")
    _wait_event(oci_node, ns, "app", lambda e: e["reason"] == "Pulled" and e["message"].startswith(f'Successfully pulled image "{app_image}"'))
    node = json.loads(oci_node.kubectl.run("get", "node", "oci-node", "-o", "json").stdout)
    import time
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not any(app_image in i["names"] for i in node["status"].get("images") or []):
        time.sleep(0.5)
        node = json.loads(oci_node.kubectl.run("get", "node", "oci-node", "-o", "json").stdout)
    entry = next(i for i in node["status"]["images"] if app_image in i["names"])
    assert cs["imageID"] in entry["names"] and entry["sizeBytes"] > 100_000


def test_command_replaces_the_entrypoint_and_args_replace_only_the_cmd(oci_node: Node, registry: Registry) -> None:
    ref = registry.push("k8py/echo", "1", image([busybox_layer()], entrypoint=["/bin/echo", "entry"], cmd=["from-cmd"]))
    ns = _ns(oci_node, "oci-argv")
    cases = {"plain": {}, "args": {"args": ["from-args"]}, "command": {"command": ["/bin/echo", "cmd-only"]},
             "both": {"command": ["/bin/echo"], "args": ["a", "b"]}}
    for name, extra in cases.items():
        oci_node.core.create_namespaced_pod(ns, pod_manifest(name, [{"name": "c", "image": ref, **extra}], node_name="oci-node",
                                                             restartPolicy="Never"))
    want = {"plain": "entry from-cmd", "args": "entry from-args", "command": "cmd-only", "both": "a b"}
    for name, line in want.items():
        oci_node.wait_pod(ns, name, phase("Succeeded"), what="Succeeded")
        assert _logs(oci_node, ns, name).strip() == line, name


def test_the_image_user_and_the_pods_namespaces_and_volumes(oci_node: Node, registry: Registry) -> None:
    ref = registry.push("k8py/user", "1", image([busybox_layer()], cmd=["sh", "-c", "echo main-uid=$(id -u) home=$HOME; sleep 3600"], user="app"))
    ns = _ns(oci_node, "oci-user")
    oci_node.core.create_namespaced_config_map(ns, {"metadata": {"name": "cfg"}, "data": {"greeting.txt": "hi from a configmap"}})
    oci_node.core.create_namespaced_pod(ns, pod_manifest("u", [{
        "name": "c", "image": ref,
        "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}, {"name": "cfg", "mountPath": "/etc/cfg"}]}],
        node_name="oci-node", volumes=[{"name": "scratch", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "cfg"}}]))
    oci_node.wait_pod(ns, "u", phase("Running"), what="Running")
    assert "main-uid=1000 home=/home/app" in _wait_log(oci_node, ns, "u", "main-uid=")
    out = oci_node.kubectl.run("exec", "-n", ns, "u", "--", "sh", "-c",
                               "id -u; hostname; cat /etc/cfg/greeting.txt; echo; ps -o pid | wc -l; echo data > /scratch/f; cat /scratch/f").stdout
    lines = out.splitlines()
    assert lines[0] == "1000"  # the image's User, looked up in its /etc/passwd
    assert lines[1] == "u"  # own uts namespace with the pod's hostname
    assert lines[2] == "hi from a configmap"
    assert int(lines[3]) <= 6  # own pid namespace: bwrap, sh, sleep, and the exec's processes
    assert lines[4] == "data"


def test_run_as_user_overrides_the_image_user_and_run_as_non_root_is_enforced(oci_node: Node, registry: Registry) -> None:
    root_image = registry.push("k8py/rootuser", "1", image([busybox_layer()], cmd=["sh", "-c", "echo uid=$(id -u) gid=$(id -g); sleep 3600"]))
    named = registry.push("k8py/nameduser", "1", image([busybox_layer()], cmd=["sh", "-c", "sleep 3600"], user="app"))
    ns = _ns(oci_node, "oci-sc")
    oci_node.core.create_namespaced_pod(ns, pod_manifest("as-2000", [{"name": "c", "image": root_image,
                                                         "securityContext": {"runAsUser": 2000}}], node_name="oci-node",
                                                         securityContext={"runAsUser": 1500, "runAsGroup": 3000}))
    assert "uid=2000 gid=3000" in _wait_log(oci_node, ns, "as-2000", "uid=")
    for name, img in (("root-refused", root_image), ("named-refused", named)):
        oci_node.core.create_namespaced_pod(ns, pod_manifest(name, [{"name": "c", "image": img, "securityContext": {"runAsNonRoot": True}}],
                                                             node_name="oci-node"))
    uid = oci_node.wait_pod(ns, "root-refused", lambda p: waiting_reason(p) == "CreateContainerConfigError",
                            what="CreateContainerConfigError")["metadata"]["uid"]
    msg = oci_node.pod(ns, "root-refused")["status"]["containerStatuses"][0]["state"]["waiting"]["message"]
    assert msg == f'container has runAsNonRoot and image will run as root (pod: "root-refused_{ns}({uid})", container: c)'
    oci_node.wait_pod(ns, "named-refused", lambda p: waiting_reason(p) == "CreateContainerConfigError", what="CreateContainerConfigError")
    msg = oci_node.pod(ns, "named-refused")["status"]["containerStatuses"][0]["state"]["waiting"]["message"]
    assert "image has non-numeric user (app), cannot verify user is non-root" in msg


def test_pull_policies_never_ifnotpresent_and_always(oci_node: Node, registry: Registry) -> None:
    ns = _ns(oci_node, "oci-policy")
    absent = f"{registry.host}/k8py/never-pulled:1"
    oci_node.core.create_namespaced_pod(ns, pod_manifest("never", [{"name": "c", "image": absent, "imagePullPolicy": "Never"}],
                                                         node_name="oci-node"))
    pod = oci_node.wait_pod(ns, "never", lambda p: waiting_reason(p) == "ErrImageNeverPull", what="ErrImageNeverPull")
    msg = pod["status"]["containerStatuses"][0]["state"]["waiting"]["message"]
    assert msg == f'Container image "{absent}" is not present with pull policy of Never'

    v1 = image([busybox_layer({"version": "one\n"})], cmd=["sh", "-c", "cat /version; sleep 3600"])
    ref = registry.push("k8py/moving", "stable", v1)
    oci_node.core.create_namespaced_pod(ns, pod_manifest("first", [{"name": "c", "image": ref}], node_name="oci-node"))
    _wait_log(oci_node, ns, "first", "one")
    # the tag moves; IfNotPresent keeps the node's copy, Always asks the registry again
    registry.push("k8py/moving", "stable", image([busybox_layer({"version": "two\n"})], cmd=["sh", "-c", "cat /version; sleep 3600"]))
    oci_node.core.create_namespaced_pod(ns, pod_manifest("cached", [{"name": "c", "image": ref, "imagePullPolicy": "IfNotPresent"}],
                                                         node_name="oci-node"))
    assert _wait_log(oci_node, ns, "cached", "one").strip() == "one"
    _wait_event(oci_node, ns, "cached", lambda e: e["reason"] == "Pulled" and "already present on machine" in e["message"])
    oci_node.core.create_namespaced_pod(ns, pod_manifest("fresh", [{"name": "c", "image": ref, "imagePullPolicy": "Always"}],
                                                         node_name="oci-node"))
    assert _wait_log(oci_node, ns, "fresh", "two").strip() == "two"
    def image_id(name: str) -> str:  # the status is written a moment after the log shows the output
        pod = oci_node.wait_pod(ns, name, lambda p: bool(((p.get("status") or {}).get("containerStatuses") or [{}])[0].get("imageID")),
                                what="with an imageID")
        return pod["status"]["containerStatuses"][0]["imageID"]

    first, fresh = image_id("first"), image_id("fresh")
    assert first != fresh and fresh.startswith(f"{registry.host}/k8py/moving@sha256:")


def test_bad_name_and_missing_tag_fail_with_upstreams_reasons(oci_node: Node, registry: Registry) -> None:
    ns = _ns(oci_node, "oci-errors")
    bad = f"{registry.host}/k8py/Bad_Name:1"
    missing = f"{registry.host}/k8py/app:no-such-tag"
    oci_node.core.create_namespaced_pod(ns, pod_manifest("bad", [{"name": "c", "image": bad}], node_name="oci-node"))
    oci_node.core.create_namespaced_pod(ns, pod_manifest("missing", [{"name": "c", "image": missing}], node_name="oci-node"))
    pod = oci_node.wait_pod(ns, "bad", lambda p: waiting_reason(p) == "InvalidImageName", what="InvalidImageName")
    assert "invalid reference format" in pod["status"]["containerStatuses"][0]["state"]["waiting"]["message"]
    # ErrImagePull, then ImagePullBackOff between retries (the status flips between them: the events keep both)
    oci_node.wait_pod(ns, "missing", lambda p: waiting_reason(p) in ("ErrImagePull", "ImagePullBackOff"), what="failing to pull")
    import time
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        messages = {e["message"] for e in oci_node.events(ns, "missing")}
        if {"Error: ErrImagePull", f'Back-off pulling image "{missing}"'} <= messages:
            break
        time.sleep(0.3)
    events = oci_node.events(ns, "missing")
    failed = [e["message"] for e in events if e["reason"] == "Failed" and e["message"].startswith("Failed to pull image")]
    assert failed and failed[0] == (f'Failed to pull image "{missing}": failed to pull and unpack image "{missing}": '
                                    f'failed to resolve reference "{missing}": {missing}: not found')
    assert any(e["reason"] == "BackOff" and e["message"] == f'Back-off pulling image "{missing}"' for e in events)


def test_a_private_registry_needs_an_image_pull_secret(oci_node: Node, auth_registry: Registry) -> None:
    ref = auth_registry.push("private/app", "1", image([busybox_layer({"private": "yes\n"})], cmd=["sh", "-c", "cat /private; sleep 3600"]))
    ns = _ns(oci_node, "oci-auth")
    oci_node.core.create_namespaced_pod(ns, pod_manifest("anon", [{"name": "c", "image": ref}], node_name="oci-node"))
    pod = oci_node.wait_pod(ns, "anon", lambda p: waiting_reason(p) in ("ErrImagePull", "ImagePullBackOff"), what="ErrImagePull")
    st = pod["status"]["containerStatuses"][0]["state"]["waiting"]
    if st["reason"] == "ErrImagePull":
        assert "pull access denied, repository does not exist or may require authorization" in st["message"]
    dockercfg = {"auths": {auth_registry.host: {"auth": base64.b64encode(b"alice:wonderland").decode()}}}
    oci_node.core.create_namespaced_secret(ns, {"metadata": {"name": "regcred"}, "type": "kubernetes.io/dockerconfigjson",
                                                "data": {".dockerconfigjson": base64.b64encode(json.dumps(dockercfg).encode()).decode()}})
    oci_node.core.create_namespaced_pod(ns, pod_manifest("authed", [{"name": "c", "image": ref}], node_name="oci-node",
                                                         imagePullSecrets=[{"name": "missing-secret"}, {"name": "regcred"}]))
    assert _wait_log(oci_node, ns, "authed", "yes").strip() == "yes"
    _wait_event(oci_node, ns, "authed", lambda e: e["reason"] == "FailedToRetrieveImagePullSecret" and "missing-secret" in e["message"])


def test_a_restarted_kubelet_adopts_a_running_oci_container_and_deletes_it_cleanly(oci_node: Node, app_image: str) -> None:
    ns = _ns(oci_node, "oci-adopt")
    oci_node.core.create_namespaced_pod(ns, pod_manifest("kept", [{"name": "c", "image": app_image}], node_name="oci-node",
                                                         terminationGracePeriodSeconds=1))
    before = oci_node.wait_pod(ns, "kept", phase("Running"), what="Running")["status"]["containerStatuses"][0]
    oci_node.kubelet.stop()
    oci_node.kubelet.start()
    out = oci_node.kubectl.run("exec", "-n", ns, "kept", "--", "cat", "/srv/hello.txt").stdout
    assert out == "hello from the image\n"
    after = oci_node.pod(ns, "kept")["status"]["containerStatuses"][0]
    assert after["containerID"] == before["containerID"] and after["restartCount"] == 0 and after["imageID"] == before["imageID"]
    records = [r for r in oci_node.kubelet.container_records() if r.get("image") == app_image and r["pod_uid"] == oci_node.pod(ns, "kept")["metadata"]["uid"]]
    cdir = os.path.join(oci_node.kubelet.root_dir, "runtime", "containers", records[0]["id"])
    assert os.path.isdir(os.path.join(cdir, "rootfs", "upper"))
    oci_node.core.delete_namespaced_pod("kept", ns)
    oci_node.wait_gone(ns, "kept")
    assert not os.path.exists(cdir)  # the container's own overlay layer went with it; the image's rootfs stays
    assert os.path.isdir(os.path.join(oci_node.kubelet.root_dir, "images", "rootfs", records[0]["image_id"].split(":", 1)[1]))


def test_the_kubelet_collects_unused_images_and_the_node_stops_listing_them(tmp_path, registry: Registry) -> None:
    # thresholds of 0%: every round is "above the high threshold", so every unused image goes
    server, kubelet, kubectl = start_node(str(tmp_path), name="gc-node", extra=(
        "--image-gc-high-threshold", "0", "--image-gc-low-threshold", "0", "--minimum-image-gc-age", "0", "--image-gc-period", "0.5"))
    api = official_client(server.url)
    node = Node(server, kubelet, kubectl, api)
    try:
        used = registry.push("gc/used", "1", image([busybox_layer({"u": "1"})], cmd=["sh", "-c", "sleep 3600"]))
        done = registry.push("gc/done", "1", image([busybox_layer({"d": "1"})], cmd=["true"]))
        ns = _ns(node, "oci-gc")
        node.core.create_namespaced_pod(ns, pod_manifest("running", [{"name": "c", "image": used}], node_name="gc-node"))
        node.core.create_namespaced_pod(ns, pod_manifest("finished", [{"name": "c", "image": done}], node_name="gc-node", restartPolicy="Never"))
        node.wait_pod(ns, "running", phase("Running"), what="Running")
        node.wait_pod(ns, "finished", phase("Succeeded"), what="Succeeded")
        store = os.path.join(kubelet.root_dir, "images", "images")

        def names() -> set[str]:
            n = node.api.sanitize_for_serialization(node.core.read_node("gc-node"))
            return {name for i in n["status"].get("images") or [] for name in i["names"]}

        # the finished pod's container still exists: its image is in use, as upstream counts it
        assert len(os.listdir(store)) == 2
        node.core.delete_namespaced_pod("finished", ns)
        node.wait_gone(ns, "finished")
        import time
        deadline = time.monotonic() + 60
        listed = names()
        while time.monotonic() < deadline and not (used in listed and done not in listed and len(os.listdir(store)) == 1):
            time.sleep(0.3)
            listed = names()
        assert used in listed and done not in listed and len(os.listdir(store)) == 1, (listed, os.listdir(store))
    finally:
        api.close()
        kubelet.stop()
        kubelet.kill_containers()
        server.stop()
