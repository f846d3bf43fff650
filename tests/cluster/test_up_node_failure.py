"""``k8py up --nodes 3``: a node fails and recovers, end to end with real processes.

A Deployment spreads over three process nodes (``nodeTaintsPolicy: Honor``:
a tainted node is no spreading domain, so the replacement may double up). The kubelet of one is frozen
(SIGSTOP: the process lives, so the supervisor does not restart it, but it
posts no status and renews no Lease — a node that fell off the network). The
node lifecycle controller marks it Unknown (NotReady) after the configured
grace period and taints it; its pods, tolerating ``unreachable`` for one
second, are evicted and replaced on the two other nodes. Thawed (SIGCONT),
the kubelet reports again: the node is Ready and untainted, and the evicted
pods are gone from it. Grace periods are shortened through the components'
flags in the cluster config file, never by sleeping.
"""

from __future__ import annotations

import functools
import json
import os
import signal

import pytest

from k8py.cluster.state import read_state
from tests.cluster.up_helpers import k8py
from tests.cluster.up_helpers import wait_for as _wait_for
from tests.support.kube import Kubectl

pytestmark = [pytest.mark.kubectl, pytest.mark.slow]

CONFIG = """kind: Cluster
nodes: 3
dns: false
components:
  controller-manager: ["--node-monitor-period", "0.5", "--node-monitor-grace-period", "6"]
  kubelet: ["--node-status-update-frequency", "1", "--lease-renew-interval", "1"]
"""

SPREAD = """apiVersion: apps/v1
kind: Deployment
metadata: {name: spread}
spec:
  replicas: 3
  selector: {matchLabels: {app: spread}}
  template:
    metadata: {labels: {app: spread}}
    spec:
      terminationGracePeriodSeconds: 1
      topologySpreadConstraints:
      - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, nodeTaintsPolicy: Honor,
         labelSelector: {matchLabels: {app: spread}}}
      tolerations:
      - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 1}
      - {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 1}
      containers: [{name: nginx, image: nginx}]
"""

VICTIM = "k8py-node-2"

#: a frozen node takes a grace period, a taint and an eviction to move: more time than the default
wait_for = functools.partial(_wait_for, timeout=120)


@pytest.mark.timeout(400)
def test_a_failed_node_goes_not_ready_its_pods_move_and_it_comes_back(tmp_path):
    data = str(tmp_path / "cluster")
    config = tmp_path / "cluster.yaml"
    config.write_text(CONFIG)
    frozen = 0
    try:
        up = k8py("up", "--detach", "--data-dir", data, "--port", "0", "--config", str(config))
        assert up.returncode == 0, up.stdout + up.stderr
        kubectl = Kubectl(read_state(data)["api"], str(tmp_path / "home"), read_state(data)["kubeconfig"])

        def node(name: str) -> dict:
            return json.loads(kubectl.run("get", "node", name, "-o", "json").stdout)

        def ready(n: dict) -> str:
            return next(c["status"] for c in n["status"]["conditions"] if c["type"] == "Ready")

        def pods() -> list[dict]:
            return json.loads(kubectl.run("get", "pods", "-l", "app=spread", "-o", "json").stdout)["items"]

        def serving() -> list[dict]:
            return [p for p in pods() if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]

        kubectl.run("create", "-f", "-", input=SPREAD)
        first = wait_for(lambda: len(r := serving()) == 3 and r, "3 Running pods")
        assert sorted(p["spec"]["nodeName"] for p in first) == ["k8py-node-0", "k8py-node-1", VICTIM]
        lost = next(p["metadata"]["name"] for p in first if p["spec"]["nodeName"] == VICTIM)

        frozen = read_state(data)["components"][f"kubelet/{VICTIM}"]["pid"]
        os.kill(frozen, signal.SIGSTOP)
        wait_for(lambda: ready(node(VICTIM)) == "Unknown", f"{VICTIM} to go NotReady")
        taints = {t["key"] for t in node(VICTIM)["spec"].get("taints") or []}
        assert "node.kubernetes.io/unreachable" in taints, taints
        # its pod is evicted (deletion begun; the frozen kubelet cannot finish it) and replaced elsewhere
        moved = wait_for(lambda: len(r := serving()) == 3 and all(p["spec"]["nodeName"] != VICTIM for p in r) and r,
                         "3 Running pods on the two live nodes")
        assert lost not in {p["metadata"]["name"] for p in moved}
        assert {p["spec"]["nodeName"] for p in moved} == {"k8py-node-0", "k8py-node-1"}

        os.kill(frozen, signal.SIGCONT)
        frozen = 0
        logs = tuple(os.path.join(data, "logs", f"{name}.log") for name in (f"kubelet-{VICTIM}", "controller-manager"))
        wait_for(lambda: ready(node(VICTIM)) == "True", f"{VICTIM} Ready again", logs=logs)
        wait_for(lambda: not any(t["key"].startswith("node.kubernetes.io/") for t in node(VICTIM)["spec"].get("taints") or []),
                 f"{VICTIM} untainted")
        # the kubelet, back, finishes the evicted pod's deletion
        wait_for(lambda: lost not in {p["metadata"]["name"] for p in pods()}, "the evicted pod gone")
        assert len(serving()) == 3
    finally:
        if frozen:
            os.kill(frozen, signal.SIGCONT)
        k8py("down", "--data-dir", data)
