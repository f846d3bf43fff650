"""``k8py up --nodes 2 --simulated-nodes 2``: four nodes, each with its own pod
range; a Deployment spreads over them (one pinned to the process nodes
spreads over both; simulated nodes report more capacity, so the scheduler
prefers them for the other); a kubelet killed with SIGKILL is restarted by
the supervisor, its node stays Ready and its pods keep running."""

from __future__ import annotations

import json
import os
import signal

import pytest

from k8py.cluster.state import read_state
from tests.cluster.up_helpers import k8py, wait_for
from tests.support.kube import Kubectl

pytestmark = [pytest.mark.kubectl, pytest.mark.slow]

PINNED = """apiVersion: apps/v1
kind: Deployment
metadata: {name: pinned}
spec:
  replicas: 4
  selector: {matchLabels: {app: pinned}}
  template:
    metadata: {labels: {app: pinned}}
    spec:
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
            - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [k8py-node-0, k8py-node-1]}]
      containers: [{name: nginx, image: nginx}]
"""


def test_process_and_simulated_nodes_share_a_deployment_and_a_killed_kubelet_comes_back(tmp_path):
    data = str(tmp_path / "cluster")
    try:
        up = k8py("up", "--detach", "--data-dir", data, "--port", "0", "--nodes", "2", "--simulated-nodes", "2", "--no-dns")
        assert up.returncode == 0, up.stdout + up.stderr
        assert "node k8py-node-0 Ready" in up.stdout and "node k8py-node-1 Ready" in up.stdout
        kubectl = Kubectl(read_state(data)["api"], str(tmp_path / "home"), read_state(data)["kubeconfig"])
        nodes = json.loads(kubectl.run("get", "nodes", "-o", "json").stdout)["items"]
        names = sorted(n["metadata"]["name"] for n in nodes)
        assert names == ["k8py-node-0", "k8py-node-1", "k8py-sim-0", "k8py-sim-1"]
        cidrs = [n["spec"].get("podCIDR") for n in nodes]
        assert len(set(cidrs)) == 4 and all(cidrs)

        kubectl.run("create", "deployment", "spread", "--image=nginx", "--replicas=8")

        def running() -> list[dict]:
            items = json.loads(kubectl.run("get", "pods", "-l", "app=spread", "-o", "json").stdout)["items"]
            return [p for p in items if p["status"].get("phase") == "Running"]

        pods = wait_for(lambda: len(r := running()) == 8 and r, "8 Running pods")
        assert len({p["spec"]["nodeName"] for p in pods}) >= 2
        assert len({p["status"]["podIP"] for p in pods}) == 8
        kubectl.run("create", "-f", "-", input=PINNED)

        def pinned() -> list[dict]:
            items = json.loads(kubectl.run("get", "pods", "-l", "app=pinned", "-o", "json").stdout)["items"]
            return [p for p in items if p["status"].get("phase") == "Running"]

        on_process_nodes = wait_for(lambda: len(r := pinned()) == 4 and r, "4 pinned pods Running")
        assert {p["spec"]["nodeName"] for p in on_process_nodes} == {"k8py-node-0", "k8py-node-1"}
        on_victim = sorted(p["metadata"]["name"] for p in on_process_nodes if p["spec"]["nodeName"] == "k8py-node-1")

        state = read_state(data)
        victim = state["components"]["kubelet/k8py-node-1"]["pid"]
        os.kill(victim, signal.SIGKILL)
        wait_for(lambda: (c := read_state(data)["components"]["kubelet/k8py-node-1"])["restarts"] == 1 and c["state"] == "running",
                 "the kubelet to be restarted")
        node = json.loads(kubectl.run("get", "node", "k8py-node-1", "-o", "json").stdout)
        assert any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"])
        # its pods' containers outlived it, and the new kubelet adopted them: same pods, still Running
        wait_for(lambda: sorted(p["metadata"]["name"] for p in pinned() if p["spec"]["nodeName"] == "k8py-node-1") == on_victim,
                 "the node's pods still Running")
        assert all(p["status"]["containerStatuses"][0]["restartCount"] == 0 for p in pinned())
    finally:
        k8py("down", "--data-dir", data)
