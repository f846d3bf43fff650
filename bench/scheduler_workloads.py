"""The scheduler benchmarks' workloads: upstream scheduler_perf's object
templates, and the scheduling cycle alone on the same shapes.

Shared by ``scheduler_bench.py`` (end to end through a real API server) and
``scheduler_alone.py`` (the scheduler process against a canned one), so both
measure the same nodes and pods:

- ``basic`` (SchedulingBasic): 4-cpu/32Gi nodes, 100m/500Mi pods;
- ``antiaffinity`` (SchedulingPodAntiAffinity): required anti-affinity per hostname;
- ``spread`` (TopologySpreading): 3 zones, maxSkew 5, DoNotSchedule;
- ``preemption``: low-priority 900m pods fill the nodes, high-priority ones preempt them;
- ``deployment`` (not one of upstream's): the pods of one ReplicaSet, which the System default
  spreading constraints (hostname and zone, ScheduleAnyway) score, as in ``k8py up``'s runs of a
  Deployment on simulated nodes (which have no zone);
- ``deployment-zones``: the same pods on nodes in 3 zones, as in most real clusters (both
  default constraints then score).

:func:`cycle_alone` runs filter + score + assume per pod in this process, with
no API at all: the ceiling the scheduler's own algorithm sets.
"""

from __future__ import annotations

import gc
import time
from typing import Any

__all__ = ["ZONES", "SPREAD", "node_obj", "pod_obj", "anti_affinity", "measured_pod", "cycle_alone"]

ZONES = ("zone-a", "zone-b", "zone-c")
SPREAD = [{"maxSkew": 5, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
           "labelSelector": {"matchLabels": {"color": "blue"}}}]


def node_obj(i: int, *, zones: bool = False, cpu: str = "4", memory: str = "32Gi") -> dict[str, Any]:
    name = f"node-{i}"
    labels = {"kubernetes.io/hostname": name}
    if zones:
        labels["topology.kubernetes.io/zone"] = ZONES[i % len(ZONES)]
    alloc = {"cpu": cpu, "memory": memory, "pods": "110", "ephemeral-storage": "100Gi"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"capacity": alloc, "allocatable": alloc, "phase": "Running",
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod_obj(name: str, namespace: str, *, cpu: str = "100m", memory: str = "500Mi", labels: dict | None = None,
            node: str = "", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
                                 "resources": {"requests": {"cpu": cpu, "memory": memory}}}], **spec},
    }
    if node:
        body["spec"]["nodeName"] = node
    return body


def anti_affinity(namespaces: list[str]) -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {"color": "green"}}, "topologyKey": "kubernetes.io/hostname",
        "namespaces": namespaces}]}}


def measured_pod(kind: str, name: str, namespace: str, node: str = "") -> dict[str, Any]:
    """A pod of workload ``kind`` (``basic``, ``antiaffinity``, ``spread``, ``deployment`` or ``deployment-zones``)."""
    if kind == "antiaffinity":
        return pod_obj(name, namespace, labels={"color": "green"}, node=node,
                       affinity=anti_affinity(["sched-setup", "sched-test"]))
    if kind == "spread":
        return pod_obj(name, namespace, labels={"color": "blue"}, node=node, topologySpreadConstraints=SPREAD)
    if kind in ("deployment", "deployment-zones"):
        body = pod_obj(name, namespace, labels={"app": "web", "pod-template-hash": "5d4f8c7b9"}, node=node)
        body["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d4f8c7b9",
                                                "uid": "8a3c1f52-0000-4000-8000-000000000001", "controller": True}]
        return body
    return pod_obj(name, namespace, node=node)


def cycle_alone(nodes: int, placed: int, pods: int, kind: str) -> float:
    """Pods/s of filter + score + assume, no API (the scheduler's own code on the same shapes)."""
    from k8py.scheduler.cache import SchedulerCache
    from k8py.scheduler.framework.interfaces import CycleState
    from k8py.scheduler.framework.types import PodInfo
    from k8py.scheduler.profile import SchedulerConfig, build_frameworks
    from k8py.scheduler.schedule_one import PodScheduler

    cache = SchedulerCache()

    class Handle:
        def __init__(self) -> None:
            self.cache = cache
            self.nodes = cache.nodes
            self.node = cache.node
            self.image_node_count = cache.image_node_count
            self.namespace_labels = lambda ns: {}

    fwk = build_frameworks(SchedulerConfig(), Handle())["default-scheduler"]
    for i in range(nodes):
        cache.add_node(node_obj(i, zones=kind in ("spread", "deployment-zones")))
    for i in range(placed):
        cache.add_pod(measured_pod(kind, f"init-{i}", "sched-setup", node=f"node-{i % nodes}"))
    algo = PodScheduler()
    infos = [PodInfo(measured_pod(kind, f"p-{i}", "sched-test")) for i in range(pods)]
    for n, info in enumerate(infos):
        info.pod["metadata"]["uid"] = f"uid-{n}"
    # collections as the scheduler process tunes them (k8py.cli.scheduler), or this
    # figure would count full collections over this process's heap
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(50_000, 50, 100)
    try:
        started = time.perf_counter()
        for info in infos:
            result = algo.schedule(fwk, CycleState(), info, cache.nodes, None, "", cache.node, changes=cache)
            cache.assume_pod(info.with_node(result.node_name))
        return pods / (time.perf_counter() - started)
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()
