"""docs/05-kubelet.md: the Verification section, against a real API server and kubelet process."""

from __future__ import annotations

import glob
import os
import time

from tests.support.kube import Kubectl
from tests.support.kubelet import KubeletProcess
from tests.support.servers import ServerProcess

POD = """apiVersion: v1
kind: Pod
metadata: {name: hello}
spec:
  nodeName: node-1
  initContainers:
  - {name: setup, image: busybox, command: [sh, -c, "echo setting up"]}
  containers:
  - name: web
    image: nginx
    readinessProbe: {httpGet: {path: /, port: 80}, periodSeconds: 1}
"""


def _until(check, timeout: float = 60.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError("condition never held")


def test_kubelet_walkthrough_verification(tmp_path) -> None:
    with ServerProcess(str(tmp_path / "demo")) as server:
        kubectl = Kubectl(server.url, str(tmp_path / "home"))
        with KubeletProcess(kubectl.kubeconfig, str(tmp_path / "demo" / "kubelet"), node_name="node-1") as kubelet:
            nodes = kubectl.run("get", "nodes").stdout.splitlines()
            assert nodes[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
            row = nodes[1].split()
            assert row[:3] == ["node-1", "Ready", "<none>"] and row[4].startswith("v1.32.")
            assert kubectl.run("apply", "-f", "-", input=POD).stdout.strip() == "pod/hello created"
            line = _until(lambda: next((l for l in kubectl.run("get", "pod", "hello").stdout.splitlines()[1:] if "1/1" in l), None))
            assert line.split()[:4] == ["hello", "1/1", "Running", "0"]
            jp = "jsonpath={.status.initContainerStatuses[0].state.terminated.reason}"
            assert kubectl.run("get", "pod", "hello", "-o", jp).stdout == "Completed"
            logs = glob.glob(os.path.join(kubelet.root_dir, "logs", "pods", "default_hello_*", "setup", "0.log"))
            assert [l.split(" ", 1)[1] for l in open(logs[0]).read().splitlines()] == ["stdout F setting up"]
            holder = kubectl.run("get", "lease", "-n", "kube-node-lease", "node-1", "-o", "jsonpath={.spec.holderIdentity}").stdout
            assert holder == "node-1"
            assert kubectl.run("delete", "pod", "hello").stdout.strip() == 'pod "hello" deleted'
