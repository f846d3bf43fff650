"""e2e: the process runtime's catalog images look like the real ones from inside. nginx ships
/usr/share/nginx/html — index.html is there, a container may write into it (its own layer) and
nginx serves what it wrote; a second pod's docroot is its own. The python image runs ``python``
(not only ``python3``), in the container and in an exec."""

from __future__ import annotations

import json
import urllib.request

from tests.kubelet.conftest import Node, phase, pod_manifest, ready


def _nginx(node: Node, ns: str, name: str) -> str:
    node.kubectl.run("apply", "-n", ns, "-f", "-", input=json.dumps(pod_manifest(name, [{
        "name": "nginx", "image": "nginx:latest", "ports": [{"containerPort": 80}],
        "readinessProbe": {"httpGet": {"path": "/", "port": 80}, "periodSeconds": 1},
    }])))
    return node.wait_pod(ns, name, ready, what="Ready")["status"]["podIP"]


def test_the_nginx_docroot_is_the_images_and_writable_per_container(node: Node, ns: str) -> None:
    ip, other = _nginx(node, ns, "web"), _nginx(node, ns, "web2")
    listing = node.kubectl.run("exec", "-n", ns, "web", "--", "ls", "/usr/share/nginx/html").stdout.split()
    assert listing == ["50x.html", "index.html"]
    node.kubectl.run("exec", "-n", ns, "web", "--", "sh", "-c", "echo hello-from-exec > /usr/share/nginx/html/foo.txt")
    with urllib.request.urlopen(f"http://{ip}/foo.txt", timeout=10) as r:
        assert r.read() == b"hello-from-exec\n"
    with urllib.request.urlopen(f"http://{ip}/", timeout=10) as r:
        assert b"Welcome to nginx!" in r.read()
    missing = node.kubectl.run("exec", "-n", ns, "web2", "--", "ls", "/usr/share/nginx/html/foo.txt", check=False)
    assert missing.returncode != 0, "the second pod saw the first one's file"
    try:
        urllib.request.urlopen(f"http://{other}/foo.txt", timeout=10)
        raise AssertionError("the second pod served the first one's file")
    except urllib.error.HTTPError as err:
        assert err.code == 404


def test_the_python_image_has_python_on_its_path(node: Node, ns: str) -> None:
    node.kubectl.run("apply", "-n", ns, "-f", "-", input=json.dumps(pod_manifest("py", [{
        "name": "py", "image": "python", "command": ["python", "-c", "import sys, time; print(sys.version_info[0]); time.sleep(600)"],
    }])))
    node.wait_pod(ns, "py", phase("Running"), what="Running")
    out = node.kubectl.run("exec", "-n", ns, "py", "--", "python", "-c", "print('from-exec')").stdout
    assert out == "from-exec\n"
