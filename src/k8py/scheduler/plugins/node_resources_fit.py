"""NodeResourcesFit: Filter on free capacity (cpu, memory, ephemeral-storage,
pods, extended resources) and Score by a strategy: LeastAllocated (default),
MostAllocated or RequestedToCapacityRatio, over weighted resources.

Filter, as upstream ``fitsRequest``: "Too many pods" when the node holds its
``pods`` allocatable already; a resource the pod requests (> 0) that exceeds
``allocatable - requested`` is "Insufficient <name>" (Unschedulable: preemption
may free it). Every insufficient resource is a reason of its own.

Score uses the *non-zero* requests for cpu and memory (a container without
requests counts as 100m / 200Mi), so empty pods still spread.

The batch forms (``filter_nodes``, ``score_nodes``) are the hot path of every
cycle: plain attribute reads in one loop, no per-node calls.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from k8py.scheduler.framework.interfaces import MAX_NODE_SCORE, ClusterEventHint, CycleState
from k8py.scheduler.framework.status import Status, unschedulable
from k8py.scheduler.framework.types import NodeInfo, PodInfo, Resources
from k8py.scheduler.plugins.names import NODE_RESOURCES_FIT

__all__ = [
    "NodeResourcesFit", "insufficient_resources", "least_allocated", "most_allocated",
    "requested_to_capacity_ratio", "allocation_score", "TOO_MANY_PODS",
]

TOO_MANY_PODS = "Too many pods"
Scorer = Callable[[int, int], int]


def insufficient_resources(req: Resources, node: NodeInfo, ignored: frozenset[str] = frozenset(),
                           ignored_groups: frozenset[str] = frozenset()) -> list[str]:
    """The reasons ``req`` does not fit on ``node`` (empty: it fits)."""
    reasons = []
    alloc, used = node.allocatable, node.requested
    if len(node.pods) + 1 > alloc.pods:
        reasons.append(TOO_MANY_PODS)
    if req.milli_cpu > 0 and req.milli_cpu > alloc.milli_cpu - used.milli_cpu:
        reasons.append("Insufficient cpu")
    if req.memory > 0 and req.memory > alloc.memory - used.memory:
        reasons.append("Insufficient memory")
    if req.ephemeral > 0 and req.ephemeral > alloc.ephemeral - used.ephemeral:
        reasons.append("Insufficient ephemeral-storage")
    for name, amount in req.scalar.items():
        if amount <= 0 or name in ignored or name.split("/", 1)[0] in ignored_groups:
            continue
        if amount > alloc.scalar.get(name, 0) - used.scalar.get(name, 0):
            reasons.append(f"Insufficient {name}")
    return reasons


def least_allocated(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


def most_allocated(requested: int, capacity: int) -> int:
    if capacity == 0:
        return 0
    requested = min(requested, capacity)
    return requested * MAX_NODE_SCORE // capacity


def requested_to_capacity_ratio(shape: Sequence[tuple[int, int]]) -> Scorer:
    """Piecewise-linear score of utilization; shape points are (utilization 0-100, score 0-10)."""
    points = sorted((u, s * MAX_NODE_SCORE // 10) for u, s in shape)

    def raw(utilization: int) -> int:
        if utilization <= points[0][0]:
            return points[0][1]
        for (u0, s0), (u1, s1) in zip(points, points[1:]):
            if utilization <= u1:
                return s0 + (s1 - s0) * (utilization - u0) // (u1 - u0)
        return points[-1][1]

    def score(requested: int, capacity: int) -> int:
        if capacity == 0 or requested > capacity:
            return raw(100)
        return raw(requested * 100 // capacity)

    return score


def _request_for(pod: PodInfo, node: NodeInfo, name: str) -> tuple[int, int]:
    """(node allocatable, requested including the pod) for scoring ``name``."""
    if name == "cpu":
        return node.allocatable.milli_cpu, node.non_zero_requested.milli_cpu + pod.non_zero.milli_cpu
    if name == "memory":
        return node.allocatable.memory, node.non_zero_requested.memory + pod.non_zero.memory
    if name not in ("ephemeral-storage", "pods") and pod.requests.scalar.get(name, 0) == 0:
        return 0, 0  # an extended resource the pod does not ask for does not count
    return node.allocatable.get(name), node.requested.get(name) + pod.requests.get(name)


def allocation_score(pod: PodInfo, node: NodeInfo, resources: Sequence[tuple[str, int]], scorer: Scorer) -> int:
    total = weights = 0
    for name, weight in resources:
        capacity, requested = _request_for(pod, node, name)
        if capacity == 0:
            continue
        total += scorer(requested, capacity) * weight
        weights += weight
    return total // weights if weights else 0


class NodeResourcesFit:
    name = NODE_RESOURCES_FIT

    def __init__(self, args: dict[str, Any] | None = None, handle: object = None) -> None:
        args = args or {}
        self.ignored = frozenset(args.get("ignoredResources") or ())
        self.ignored_groups = frozenset(args.get("ignoredResourceGroups") or ())
        strategy = args.get("scoringStrategy") or {}
        self.strategy = strategy.get("type") or "LeastAllocated"
        self.resources = [(r["name"], int(r.get("weight") or 1)) for r in strategy.get("resources") or ()] or [("cpu", 1), ("memory", 1)]
        if self.strategy == "LeastAllocated":
            self.scorer: Scorer = least_allocated
        elif self.strategy == "MostAllocated":
            self.scorer = most_allocated
        elif self.strategy == "RequestedToCapacityRatio":
            shape = ((strategy.get("requestedToCapacityRatio") or {}).get("shape")) or [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]
            self.scorer = requested_to_capacity_ratio([(int(p["utilization"]), int(p["score"])) for p in shape])
        else:
            raise ValueError(f"scoringStrategy.type: Unsupported value: {self.strategy!r}: supported values: "
                             '"LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"')
        self._default_scoring = self.strategy == "LeastAllocated" and self.resources == [("cpu", 1), ("memory", 1)]

    def local_key(self, pod: PodInfo) -> object:
        """Filter and Score read only the node and this digest of the pod (see framework.node_local)."""
        return pod.shape("requests")

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        reasons = insufficient_resources(pod.requests, node, self.ignored, self.ignored_groups)
        return unschedulable(*reasons) if reasons else None

    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo], failed: dict[str, Status]) -> list[NodeInfo]:
        req = pod.requests
        cpu, mem, eph = req.milli_cpu, req.memory, req.ephemeral
        simple = not req.scalar
        out = []
        append = out.append
        for node in nodes:
            a, u = node.allocatable, node.requested
            if (simple and len(node.pods) < a.pods and cpu <= a.milli_cpu - u.milli_cpu
                    and mem <= a.memory - u.memory and eph <= a.ephemeral - u.ephemeral):
                append(node)  # the common case; anything else takes the exact path below
                continue
            reasons = insufficient_resources(req, node, self.ignored, self.ignored_groups)
            if reasons:
                failed[node.name] = unschedulable(*reasons).with_plugin(self.name)
            else:
                append(node)
        return out

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        return allocation_score(pod, node, self.resources, self.scorer)

    def score_nodes(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> list[int]:
        if not self._default_scoring:
            return [allocation_score(pod, n, self.resources, self.scorer) for n in nodes]
        pc, pm = pod.non_zero.milli_cpu, pod.non_zero.memory
        out = []
        for n in nodes:
            ac, am = n.allocatable.milli_cpu, n.allocatable.memory
            z = n.non_zero_requested
            if ac and am:
                rc, rm = z.milli_cpu + pc, z.memory + pm
                sc = (ac - rc) * 100 // ac if rc <= ac else 0
                sm = (am - rm) * 100 // am if rm <= am else 0
                out.append((sc + sm) // 2)
            else:
                out.append(allocation_score(pod, n, self.resources, self.scorer))
        return out

    def events_to_register(self) -> list[ClusterEventHint]:
        def node_hint(pod: PodInfo, old: dict | None, new: dict | None) -> bool:
            if new is None:
                return False
            probe = NodeInfo("probe")
            probe.set_node(new)
            probe.allocatable.pods = max(probe.allocatable.pods, 1)
            # only whether it could ever fit: the node's own pods are not known here
            return not insufficient_resources(pod.requests, probe, self.ignored, self.ignored_groups)

        return [ClusterEventHint("Node", frozenset({"Add", "UpdateNodeAllocatable"}), node_hint),
                ClusterEventHint("AssignedPod", frozenset({"Delete", "UpdatePodScaleDown"})),
                ClusterEventHint("Pod", frozenset({"UpdatePodScaleDown"}))]
