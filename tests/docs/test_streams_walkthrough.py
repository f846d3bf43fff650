"""docs/06-logs-exec-port-forward.md: the Verification section, against a real API server
process, a real ``k8py kubelet`` process and the real kubectl."""

from __future__ import annotations

import re
import socket
import urllib.request

from tests.cluster.up_helpers import wait_for
from tests.support.kube import Kubectl
from tests.support.kubelet import KubeletProcess
from tests.support.servers import ServerProcess

ON_NODE = '--overrides={"spec":{"nodeName":"node-1"}}'
TALKER = "echo hello; i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.3; done"


def test_walkthrough_verification_steps(tmp_path):
    with ServerProcess(str(tmp_path / "demo")) as server:
        kubectl = Kubectl(server.url, str(tmp_path / "home"))
        with KubeletProcess(kubectl.kubeconfig, str(tmp_path / "kubelet"), node_name="node-1"):
            kubectl.run("run", "talker", "--image=busybox", ON_NODE, "--", "sh", "-c", TALKER)
            kubectl.run("wait", "--for=condition=Ready", "pod/talker", "--timeout=60s")
            assert kubectl.run("get", "pod", "talker", "-o", "jsonpath={.spec.nodeName}").stdout == "node-1"

            wait_for(lambda: "tick 2" in kubectl.run("logs", "talker").stdout, "two ticks")
            tail = kubectl.run("logs", "talker", "--tail=2", "--timestamps").stdout.splitlines()
            assert len(tail) == 2
            assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z tick \d+", line) for line in tail), tail
            follow = kubectl.popen("logs", "-f", "--tail=1", "talker")
            try:
                assert follow.stdout is not None
                first = int(follow.stdout.readline().split()[1])
                assert int(follow.stdout.readline().split()[1]) == first + 1
            finally:
                follow.kill()
                follow.wait()

            result = kubectl.run("exec", "talker", "--", "sh", "-c", "echo out; echo err >&2; exit 3", check=False)
            assert (result.returncode, result.stdout) == (3, "out\n")
            assert "err\n" in result.stderr and "command terminated with exit code 3" in result.stderr

            kubectl.run("run", "web", "--image=nginx", "--port=80", ON_NODE)
            kubectl.run("wait", "--for=condition=Ready", "pod/web", "--timeout=60s")
            # Ready has no probe to wait for here: wait until the web server listens on the pod's IP
            pod_ip = kubectl.run("get", "pod", "web", "-o", "jsonpath={.status.podIP}").stdout

            def serving() -> bool:
                try:
                    with urllib.request.urlopen(f"http://{pod_ip}/", timeout=5):
                        return True
                except OSError:
                    return False

            wait_for(serving, "nginx to listen")
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                local = s.getsockname()[1]
            forward = kubectl.popen("port-forward", "pod/web", f"{local}:80")
            try:
                assert forward.stdout is not None and forward.stdout.readline().startswith("Forwarding from")
                with urllib.request.urlopen(f"http://127.0.0.1:{local}/", timeout=30) as page:
                    assert b"Welcome to nginx!" in page.read()
            finally:
                forward.terminate()
                forward.wait(30)

            top = kubectl.run("top", "pods").stdout
            row = next(line.split() for line in top.splitlines() if line.startswith("talker"))
            assert row[1].endswith("m") and row[2].endswith("Mi")
            assert "node-1" in kubectl.run("top", "nodes").stdout
