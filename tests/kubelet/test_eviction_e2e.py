"""e2e: node-pressure eviction with the real host's readings.

A real API server, controller manager (node lifecycle: the pressure taints) and kubelet.
Four pods run first under the default thresholds; then the kubelet restarts (adopting
them) with thresholds set relative to what the host has — ``memory.available<100%``,
``nodefs.available<100%``, ``imagefs.available<100%`` and ``pid.available<100%`` can only be met, since nothing has all
of its capacity free — so the pressure is certain, whatever else the machine runs. The
kubelet then reports the three pressure conditions, the controller manager taints the node,
and the pods are evicted one at a time in upstream's order for memory (usage over requests
first, then priority, then usage), each Failed with reason Evicted and upstream's message;
a new pod is refused at admission. The order is read from a watch (events in
resourceVersion order), not from timings.
"""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from typing import Any, Iterator

import kubernetes
import pytest

from tests.kubelet.conftest import Node, phase, pod_manifest
from tests.support.kube import Kubectl, official_client
from tests.support.kubelet import KubeletProcess
from tests.support.servers import ServerThread, sqlite_storage

HOG = "import time; b = b'x' * (64 << 20); time.sleep(3600)"  # written, so resident


@pytest.fixture
def cluster(tmp_path) -> Iterator[tuple[Node, str]]:
    server = ServerThread(sqlite_storage(str(tmp_path / "api"))).start()
    kubectl = Kubectl(server.url, str(tmp_path / "home"))
    api = official_client(server.url)
    cm = subprocess.Popen([sys.executable, "-m", "k8py", "controller-manager", "--kubeconfig", kubectl.kubeconfig, "--port", "0",
                           "--controllers", "nodelifecycle"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    name = f"evict-{random.randint(0, 10**6)}"
    kubelet = KubeletProcess(kubectl.kubeconfig, str(tmp_path / "kubelet"), node_name=name, extra=("--housekeeping-interval", "0.5"))
    node = Node(server, kubelet.start(), kubectl, api)
    try:
        yield node, name
    finally:
        node.kubelet.stop()
        node.kubelet.kill_containers()
        cm.terminate()
        cm.wait(30)
        api.close()
        server.stop()


def _watch_failures(node: Node, ns: str, into: list[str], stop: threading.Event) -> threading.Thread:
    def run() -> None:
        w = kubernetes.watch.Watch()
        for ev in w.stream(node.core.list_namespaced_pod, ns, timeout_seconds=240):
            pod = ev["object"]
            if pod.status and pod.status.phase == "Failed" and pod.metadata.name not in into:
                into.append(pod.metadata.name)
            if stop.is_set():
                w.stop()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _container(name: str, command: list[str], **resources: Any) -> dict[str, Any]:
    return {"name": name, "image": "busybox", "command": command, "resources": resources}


@pytest.mark.timeout(300)
def test_pressure_conditions_taints_and_evictions_in_upstreams_order(cluster: tuple[Node, str]) -> None:
    node, name = cluster
    ns = f"ev{random.randint(0, 10**6)}"
    node.core.create_namespace({"metadata": {"name": ns}})
    high = f"{ns}-high"
    kubernetes.client.SchedulingV1Api(node.api).create_priority_class({"metadata": {"name": high}, "value": 1000})
    sleep = ["sleep", "3600"]
    pods = {
        "guaranteed": _container("guaranteed", sleep, requests={"memory": "256Mi", "cpu": "50m"}, limits={"memory": "256Mi", "cpu": "50m"}),
        "important": _container("important", ["python3", "-c", HOG], requests={"memory": "1Mi"}),
        "besteffort": _container("besteffort", sleep),
        "hog": _container("hog", ["python3", "-c", HOG], requests={"memory": "1Mi"}),
    }
    for pod_name, c in pods.items():
        extra = {"priorityClassName": high} if pod_name == "important" else {}
        node.core.create_namespaced_pod(ns, pod_manifest(pod_name, [c], node_name=name, terminationGracePeriodSeconds=30, **extra))
    for pod_name in pods:
        node.wait_pod(ns, pod_name, phase("Running"), what="Running")
    n = node.core.read_node(name)
    assert {c.type: c.status for c in n.status.conditions}["MemoryPressure"] == "False"  # the defaults hold on this host

    failed: list[str] = []
    stop = threading.Event()
    watcher = _watch_failures(node, ns, failed, stop)
    node.kubelet.stop()  # its containers keep running; the next kubelet adopts them under pressure
    node.kubelet = KubeletProcess(node.kubectl.kubeconfig, node.kubelet.root_dir, node_name=name, extra=(
        "--housekeeping-interval", "0.5", "--eviction-pressure-transition-period", "600",
        "--eviction-hard", "memory.available<100%,nodefs.available<100%,imagefs.available<100%,pid.available<100%")).start()

    deadline = time.monotonic() + 120
    while len(failed) < 4 and time.monotonic() < deadline:
        time.sleep(0.2)
    stop.set()
    assert failed == ["hog", "besteffort", "important", "guaranteed"], (failed, "".join(list(node.kubelet.output)[-30:]))

    for pod_name in pods:
        st = node.pod(ns, pod_name)["status"]
        assert st["phase"] == "Failed" and st["reason"] == "Evicted", st
        assert st["message"].startswith("The node was low on resource: memory. Threshold quantity: "), st["message"]
        target = next(c for c in st["conditions"] if c["type"] == "DisruptionTarget")
        assert target["status"] == "True" and target["reason"] == "TerminationByKubelet" and target["message"] == st["message"]
        assert "terminated" in st["containerStatuses"][0]["state"]
    hog = node.pod(ns, "hog")["status"]["message"]
    assert "Container hog was using " in hog and ", request is 1Mi, has larger consumption of memory. " in hog, hog
    assert "Container guaranteed" not in node.pod(ns, "guaranteed")["status"]["message"]  # within its request
    assert any(e["reason"] == "Evicted" and e["type"] == "Warning" for e in node.events(ns, "hog"))

    # the node says so, and the controller manager taints it
    def pressure() -> tuple[dict[str, str], set[str]]:
        n = node.core.read_node(name)
        return {c.type: c.status for c in n.status.conditions}, {f"{t.key}:{t.effect}" for t in n.spec.taints or []}

    deadline = time.monotonic() + 60
    conditions, taints = pressure()
    want = {"node.kubernetes.io/memory-pressure:NoSchedule", "node.kubernetes.io/disk-pressure:NoSchedule",
            "node.kubernetes.io/pid-pressure:NoSchedule"}
    while not want <= taints and time.monotonic() < deadline:
        time.sleep(0.3)
        conditions, taints = pressure()
    assert conditions["MemoryPressure"] == conditions["DiskPressure"] == conditions["PIDPressure"] == "True", conditions
    assert want <= taints, taints
    assert conditions["Ready"] == "True"

    # a new pod is refused at admission, as upstream
    node.core.create_namespaced_pod(ns, pod_manifest("late", [_container("late", sleep)], node_name=name))
    st = node.wait_pod(ns, "late", phase("Failed"), what="refused")["status"]
    assert st["reason"] == "Evicted" and st["message"] == "The node had condition: [MemoryPressure DiskPressure PIDPressure]. ", st
    assert not st.get("containerStatuses") or all("running" not in c["state"] for c in st["containerStatuses"])
    assert not [c for c in st["conditions"] if c["type"] == "DisruptionTarget"], st["conditions"]  # refused, not disrupted
    watcher.join(5)
