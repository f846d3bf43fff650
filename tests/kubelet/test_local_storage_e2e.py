"""e2e: local ephemeral-storage eviction and the node's disk reclaim, with a real kubelet.

A real API server and ``k8py kubelet`` (process runtime, housekeeping every 0.5 s):

- a pod whose containers' logs pass their ``limits.ephemeral-storage`` is evicted at once
  with upstream's messages — the pod's total against the sum of its limits first, then one
  container against its own;
- under disk pressure (``nodefs.available<100%``, which any real disk meets) the kubelet first
  removes the dead containers of a finished pod (their records and log files go) and only
  then, the pressure still there, evicts a running pod for ephemeral-storage. The order is read
  from the kubelet's own log, which says each step.
"""

from __future__ import annotations

import os
import random
from typing import Iterator

import pytest

from tests.kubelet.conftest import Node, phase, pod_manifest, start_node
from tests.support.kube import official_client
from tests.support.kubelet import KubeletProcess

FAST = ("--housekeeping-interval", "0.5")
WRITE_2MI = "head -c 2097152 /dev/zero | tr '\\0' x; echo; sleep 600"


@pytest.fixture
def fast_node(tmp_path) -> Iterator[Node]:
    name = f"ls-{random.randint(0, 10**6)}"
    server, kubelet, kubectl = start_node(str(tmp_path), name=name, extra=FAST)
    api = official_client(server.url)
    node = Node(server, kubelet, kubectl, api)
    try:
        yield node
    finally:
        node.kubelet.stop()
        node.kubelet.kill_containers()
        api.close()
        server.stop()


def _evicted(node: Node, ns: str, name: str) -> dict:
    st = node.wait_pod(ns, name, phase("Failed"), what="Failed (evicted)")["status"]
    assert st["reason"] == "Evicted", st
    return st


def test_containers_over_their_ephemeral_storage_limits_get_the_pod_evicted(fast_node: Node) -> None:
    node, ns = fast_node, "default"
    limit = {"limits": {"ephemeral-storage": "1Mi"}}
    node.core.create_namespaced_pod(ns, pod_manifest("alone", [{"name": "c", "image": "busybox", "command": ["sh", "-c", WRITE_2MI],
                                                                 "resources": limit}], node_name=node.kubelet.node_name,
                                                     terminationGracePeriodSeconds=30))
    node.core.create_namespaced_pod(ns, pod_manifest("pair", [
        {"name": "noisy", "image": "busybox", "command": ["sh", "-c", WRITE_2MI], "resources": limit},
        {"name": "roomy", "image": "busybox", "command": ["sleep", "600"], "resources": {"limits": {"ephemeral-storage": "100Mi"}}},
    ], node_name=node.kubelet.node_name, terminationGracePeriodSeconds=30))
    alone = _evicted(node, ns, "alone")
    assert alone["message"] == "Pod ephemeral local storage usage exceeds the total limit of containers 1Mi. ", alone
    pair = _evicted(node, ns, "pair")
    assert pair["message"] == 'Container noisy exceeded its local ephemeral storage limit "1Mi". ', pair
    # its containers are killed: nothing runs on
    pair = node.wait_pod(ns, "pair", lambda p: all("terminated" in c["state"] for c in p["status"]["containerStatuses"]),
                         timeout=60, what="with every container terminated")["status"]
    assert any(e["reason"] == "Evicted" and e["message"] == pair["message"] for e in node.events(ns, "pair"))
    assert not [c for c in pair["conditions"] if c["type"] == "DisruptionTarget"], pair["conditions"]  # upstream sets none here


def test_disk_pressure_removes_dead_containers_before_it_evicts_a_pod(fast_node: Node) -> None:
    node, ns = fast_node, "default"
    name = node.kubelet.node_name
    node.core.create_namespaced_pod(ns, pod_manifest("finished", [{"name": "job", "image": "busybox", "command": ["sh", "-c", "echo done"]}],
                                                     node_name=name, restartPolicy="Never"))
    node.core.create_namespaced_pod(ns, pod_manifest("runner", [{"name": "c", "image": "busybox", "command": ["sleep", "600"]}],
                                                     node_name=name, terminationGracePeriodSeconds=30))
    node.wait_pod(ns, "finished", phase("Succeeded"), what="Succeeded")
    node.wait_pod(ns, "runner", phase("Running"), what="Running")
    dead = [r for r in node.kubelet.container_records() if r["name"] == "job"]
    assert len(dead) == 1 and os.path.exists(dead[0]["log_path"])

    node.kubelet.stop()  # the next kubelet adopts "runner" and finds the disk under pressure
    node.kubelet = KubeletProcess(node.kubectl.kubeconfig, node.kubelet.root_dir, node_name=name, extra=(
        *FAST, "--eviction-pressure-transition-period", "600", "--eviction-hard", "nodefs.available<100%")).start()
    st = _evicted(node, ns, "runner")
    assert st["message"].startswith("The node was low on resource: ephemeral-storage. Threshold quantity: "), st
    # the finished pod's container and its log were reclaimed first
    assert not [r for r in node.kubelet.container_records() if r["name"] == "job"]
    assert not os.path.exists(dead[0]["log_path"])
    lines = list(node.kubelet.output)
    removed = next(i for i, line in enumerate(lines) if "removed a dead container to reclaim disk" in line)
    evicting = next(i for i, line in enumerate(lines) if "evicting pod" in line)
    assert removed < evicting, "".join(lines[-40:])
    assert node.pod(ns, "finished")["status"]["phase"] == "Succeeded"  # its status stays: only the runtime's leftovers went
