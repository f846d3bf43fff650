"""e2e: the whole control plane — API server, controller manager, scheduler, two kubelets.

A Deployment made with kubectl is scheduled onto the nodes and its pods run
on pod IPs from each node's ``spec.podCIDR`` (set by node IPAM); ``kubectl
rollout status`` completes; a static pod from a manifest directory shows up
as a mirror pod.
"""

from __future__ import annotations

import ipaddress
import json
import random
import subprocess
import sys
import time

import pytest

from tests.kubelet.conftest import Node
from tests.support.kube import Kubectl, official_client
from tests.support.kubelet import KubeletProcess
from tests.support.servers import ServerThread, sqlite_storage


def _component(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "k8py", *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)


@pytest.mark.timeout(300)
def test_a_deployment_is_scheduled_and_runs_on_pod_ips_from_node_ipam(tmp_path) -> None:
    cidr = f"127.{random.randint(65, 127)}.0.0/16"
    server = ServerThread(sqlite_storage(str(tmp_path / "api"))).start()
    kubectl = Kubectl(server.url, str(tmp_path / "home"))
    api = official_client(server.url)
    procs = [_component("controller-manager", "--kubeconfig", kubectl.kubeconfig, "--port", "0", "--cluster-cidr", cidr),
             _component("scheduler", "--kubeconfig", kubectl.kubeconfig, "--port", "0")]
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "static.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: static-web, namespace: default}\n"
        "spec: {containers: [{name: c, image: busybox, command: [sleep, '600']}]}\n")
    kubelets = [KubeletProcess(kubectl.kubeconfig, str(tmp_path / "k1"), node_name="worker-1",
                               extra=("--pod-manifest-path", str(manifests))),
                KubeletProcess(kubectl.kubeconfig, str(tmp_path / "k2"), node_name="worker-2")]
    try:
        for k in kubelets:
            k.start()
        node = Node(server, kubelets[0], kubectl, api)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            cidrs = {n.metadata.name: n.spec.pod_cidr for n in node.core.list_node().items}
            if len(cidrs) == 2 and all(cidrs.values()):
                break
            time.sleep(0.3)
        assert all(ipaddress.ip_network(c).subnet_of(ipaddress.ip_network(cidr)) for c in cidrs.values()), cidrs
        time.sleep(3)  # the kubelets read spec.podCIDR back at their next node status check (every 2 s here)
        kubectl.run("create", "deployment", "web", "--image=nginx", "--replicas=4")
        kubectl.run("rollout", "status", "deployment/web", "--timeout=120s", timeout=150)
        pods = json.loads(kubectl.run("get", "pods", "-l", "app=web", "-o", "json").stdout)["items"]
        assert len(pods) == 4
        for p in pods:
            assert p["status"]["phase"] == "Running"
            own = ipaddress.ip_network(cidrs[p["spec"]["nodeName"]])
            assert ipaddress.ip_address(p["status"]["podIP"]) in own, (p["status"]["podIP"], own)
        mirror = node.wait_pod("default", "static-web-worker-1", lambda p: p["status"].get("phase") == "Running", what="Running")
        assert mirror["metadata"]["annotations"]["kubernetes.io/config.mirror"]
        assert mirror["metadata"]["ownerReferences"][0]["kind"] == "Node" and mirror["spec"]["nodeName"] == "worker-1"
        kubectl.run("delete", "deployment", "web")
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and json.loads(kubectl.run("get", "pods", "-l", "app=web", "-o", "json").stdout)["items"]:
            time.sleep(0.5)
        assert not json.loads(kubectl.run("get", "pods", "-l", "app=web", "-o", "json").stdout)["items"]
    finally:
        for p in procs:
            p.terminate()
            p.wait(30)
        for k in kubelets:
            k.stop()
            k.kill_containers()
        api.close()
        server.stop()
