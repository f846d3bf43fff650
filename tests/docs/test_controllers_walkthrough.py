"""docs/04-controllers.md: the Verification section, against a real API server
process, the real ``k8py controller-manager`` process and the real kubectl."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request

from tests.cluster.up_helpers import wait_for
from tests.support.kube import Kubectl
from tests.support.servers import ServerProcess

REPLICASET = """apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: nginx}]}
"""


def test_walkthrough_verification_steps(tmp_path):
    with ServerProcess(str(tmp_path / "demo")) as server:
        kubectl = Kubectl(server.url, str(tmp_path / "home"))
        manager = subprocess.Popen([sys.executable, "-m", "k8py", "controller-manager", "--kubeconfig", kubectl.kubeconfig,
                                    "--port", "0"], stdout=subprocess.PIPE, stderr=open(tmp_path / "cm.log", "w"), text=True)
        try:
            line = manager.stdout.readline()
            port = re.search(r"http://127\.0\.0\.1:(\d+); controllers: replicaset,", line)
            assert port, line
            with urllib.request.urlopen(f"http://127.0.0.1:{port.group(1)}/healthz", timeout=10) as r:
                assert r.read() == b"ok"

            def pods() -> list[dict]:
                out = kubectl.run("get", "pods", "-l", "app=web", "-o", "json").stdout
                return [p for p in json.loads(out)["items"] if not p["metadata"].get("deletionTimestamp")]

            kubectl.run("create", "-f", "-", input=REPLICASET)
            wait_for(lambda: len(pods()) == 3, "3 pods")
            uid = kubectl.run("get", "rs", "web", "-o", "jsonpath={.metadata.uid}").stdout
            assert all(p["metadata"]["ownerReferences"][0]["uid"] == uid for p in pods())
            wait_for(lambda: kubectl.run("get", "rs", "web", "-o", "jsonpath={.status.replicas}").stdout == "3", "status")

            kubectl.run("scale", "rs", "web", "--replicas=5")
            wait_for(lambda: len(pods()) == 5, "5 pods")
            victim = pods()[0]["metadata"]["name"]
            kubectl.run("delete", "pod", victim)
            wait_for(lambda: len(pods()) == 5 and victim not in [p["metadata"]["name"] for p in pods()], "a replacement")
            kubectl.run("scale", "rs", "web", "--replicas=2")
            wait_for(lambda: len(pods()) == 2, "2 pods")

            kubectl.run("delete", "rs", "web")
            wait_for(lambda: not pods(), "the pods to be collected")

            kubectl.run("create", "namespace", "scratch")
            wait_for(lambda: kubectl.run("get", "serviceaccount", "default", "-n", "scratch", check=False).returncode == 0,
                     "the default ServiceAccount")
            kubectl.run("create", "configmap", "c", "-n", "scratch")
            kubectl.run("delete", "namespace", "scratch", "--timeout=60s")
            assert kubectl.run("get", "namespace", "scratch", check=False).returncode != 0
        finally:
            manager.terminate()
            assert manager.wait(15) == 0
