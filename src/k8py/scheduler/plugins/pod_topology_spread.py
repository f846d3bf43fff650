"""PodTopologySpread: keep matching pods evenly spread across topology domains
(upstream ``podtopologyspread``).

A constraint (``maxSkew``, ``topologyKey``, ``whenUnsatisfiable``,
``labelSelector`` with ``matchLabelKeys``, ``minDomains``,
``nodeAffinityPolicy`` default Honor, ``nodeTaintsPolicy`` default Ignore)
counts the pods its selector matches in the pod's namespace, per value of the
key, over the *eligible* nodes (those with every constraint's key, and passing
the policies).

- Filter (``DoNotSchedule``): a node without the key is
  UnschedulableAndUnresolvable; placing the pod there must not make
  ``count + self - min`` exceed ``maxSkew`` (min over domains, 0 while there
  are fewer than ``minDomains`` domains) — else Unschedulable.
- Score (``ScheduleAnyway``): fewer matching pods is better, each constraint
  weighted by ``log(domains + 2)``; normalized so the emptiest gets 100.
- A pod with no constraints gets the cluster defaults (hostname maxSkew 3,
  zone maxSkew 5, both ScheduleAnyway) when a controller owns it; k8py
  selects by the pod's own labels there (upstream merges the selectors of the
  Services and workloads selecting the pod).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Sequence

from k8py.api.selectors import LabelSelector, Operator, Requirement, label_selector_from_dict
from k8py.scheduler.framework.interfaces import MAX_NODE_SCORE, ClusterEventHint, CycleState, PreFilterResult
from k8py.scheduler.framework.status import Code, Status, unresolvable, unschedulable
from k8py.scheduler.framework.types import NodeInfo, PodInfo
from k8py.scheduler.plugins.names import POD_TOPOLOGY_SPREAD
from k8py.scheduler.plugins.node_affinity import required_affinity
from k8py.scheduler.plugins.taint_toleration import first_untolerated

__all__ = ["PodTopologySpread", "Constraint", "constraints_of", "spread_state", "check_node", "score_for_count",
           "REASON_MISSING_LABEL", "REASON_CONSTRAINTS", "HOSTNAME", "ZONE"]

REASON_MISSING_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"
REASON_CONSTRAINTS = "node(s) didn't match pod topology spread constraints"
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
DEFAULT_CONSTRAINTS = [
    {"topologyKey": HOSTNAME, "whenUnsatisfiable": "ScheduleAnyway", "maxSkew": 3},
    {"topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway", "maxSkew": 5},
]
_FILTER_KEY = "PreFilter" + POD_TOPOLOGY_SPREAD
_SCORE_KEY = "PreScore" + POD_TOPOLOGY_SPREAD
Object = dict[str, Any]


class Constraint:
    __slots__ = ("max_skew", "key", "hard", "selector", "min_domains", "honor_affinity", "honor_taints")

    def __init__(self, raw: Object, pod: PodInfo, selector: LabelSelector | None = None) -> None:
        self.max_skew = int(raw.get("maxSkew") or 1)
        self.key: str = raw.get("topologyKey") or ""
        self.hard = (raw.get("whenUnsatisfiable") or "DoNotSchedule") == "DoNotSchedule"
        if selector is None:
            selector = label_selector_from_dict(raw.get("labelSelector")) if raw.get("labelSelector") is not None else LabelSelector.match_nothing()
            extra = [Requirement.new(k, Operator.IN, [pod.labels[k]]) for k in raw.get("matchLabelKeys") or () if k in pod.labels]
            if extra and not selector.nothing:
                selector = LabelSelector.of([*selector.requirements, *extra])
        self.selector = selector
        self.min_domains = int(raw.get("minDomains") or 1)
        self.honor_affinity = (raw.get("nodeAffinityPolicy") or "Honor") == "Honor"
        self.honor_taints = (raw.get("nodeTaintsPolicy") or "Ignore") == "Honor"


def constraints_of(pod: PodInfo, defaults: list[Object] | None = None) -> list[Constraint]:
    cached = pod.memo.get("topology-spread")
    if cached is None:
        raw = pod.spec.get("topologySpreadConstraints") or ()
        if raw:
            cached = [Constraint(c, pod) for c in raw]
        elif defaults and pod.labels and any(r.get("controller") for r in (pod.pod.get("metadata") or {}).get("ownerReferences") or ()):
            selector = LabelSelector.of([Requirement.new(k, Operator.EQUALS, [v]) for k, v in pod.labels.items()])
            cached = [Constraint(c, pod, selector) for c in defaults]
        else:
            cached = []
        pod.memo["topology-spread"] = cached
    return cached  # type: ignore[no-any-return]


def _count_matching(node: NodeInfo, selector: LabelSelector, namespace: str) -> int:
    n = 0
    for p in node.pods.values():
        if p.namespace == namespace and selector.matches(p.labels) and not (p.pod.get("metadata") or {}).get("deletionTimestamp"):
            n += 1
    return n


def _eligible(pod: PodInfo, node: NodeInfo, constraints: Sequence[Constraint], c: Constraint) -> bool:
    if any(x.key not in node.labels for x in constraints):
        return False
    if c.honor_affinity and not required_affinity(pod).match(node.labels, node.name):
        return False
    if c.honor_taints and first_untolerated(node.no_schedule_taints, pod.tolerations) is not None:
        return False
    return True


class SpreadState:
    __slots__ = ("constraints", "counts", "domains", "pod")

    def __init__(self, pod: PodInfo, constraints: list[Constraint]) -> None:
        self.pod = pod
        self.constraints = constraints
        self.counts: list[dict[str, int]] = [defaultdict(int) for _ in constraints]
        self.domains: list[set[str]] = [set() for _ in constraints]

    def clone(self) -> SpreadState:
        c = SpreadState(self.pod, self.constraints)
        c.counts = [defaultdict(int, d) for d in self.counts]
        c.domains = [set(d) for d in self.domains]
        return c

    def min_match(self, i: int) -> int:
        c = self.constraints[i]
        if len(self.domains[i]) < c.min_domains:
            return 0
        return min((self.counts[i].get(d, 0) for d in self.domains[i]), default=0)

    def update_with(self, existing: PodInfo, node: NodeInfo, sign: int) -> None:
        for i, c in enumerate(self.constraints):
            value = node.labels.get(c.key)
            if value is None or value not in self.domains[i] or existing.namespace != self.pod.namespace:
                continue
            if c.selector.matches(existing.labels):
                self.counts[i][value] += sign


def spread_state(pod: PodInfo, nodes: Sequence[NodeInfo], constraints: list[Constraint]) -> SpreadState:
    state = SpreadState(pod, constraints)
    for node in nodes:
        for i, c in enumerate(constraints):
            if not _eligible(pod, node, constraints, c):
                continue
            value = node.labels[c.key]
            state.domains[i].add(value)
            if node.pods:
                state.counts[i][value] += _count_matching(node, c.selector, pod.namespace)
    return state


def check_node(state: SpreadState, node: NodeInfo) -> Status | None:
    pod = state.pod
    for i, c in enumerate(state.constraints):
        value = node.labels.get(c.key)
        if value is None:
            return unresolvable(REASON_MISSING_LABEL)
        self_match = 1 if c.selector.matches(pod.labels) else 0
        skew = state.counts[i].get(value, 0) + self_match - state.min_match(i)
        if skew > c.max_skew:
            return unschedulable(REASON_CONSTRAINTS)
    return None


def score_for_count(count: int, max_skew: int, weight: float) -> float:
    return count * weight + (max_skew - 1)


class PodTopologySpread:
    name = POD_TOPOLOGY_SPREAD

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        args = args or {}
        self.handle = handle
        policy = args.get("defaultingType") or "System"
        self.defaults = DEFAULT_CONSTRAINTS if policy == "System" else list(args.get("defaultConstraints") or ())

    def _all_nodes(self, nodes: Sequence[NodeInfo]) -> Sequence[NodeInfo]:
        return self.handle.nodes if self.handle is not None else nodes

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> tuple[PreFilterResult | None, Status | None]:
        hard = [c for c in constraints_of(pod, self.defaults) if c.hard]
        if not hard:
            return None, Status(Code.SKIP)
        state.write(_FILTER_KEY, spread_state(pod, nodes, hard))
        return None, None

    def add_pod(self, state: CycleState, pod: PodInfo, add: PodInfo, node: NodeInfo) -> None:
        s = state.read(_FILTER_KEY)
        if s is not None:
            s.update_with(add, node, +1)

    def remove_pod(self, state: CycleState, pod: PodInfo, remove: PodInfo, node: NodeInfo) -> None:
        s = state.read(_FILTER_KEY)
        if s is not None:
            s.update_with(remove, node, -1)

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        s = state.read(_FILTER_KEY)
        return check_node(s, node) if s is not None else None

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        soft = [c for c in constraints_of(pod, self.defaults) if not c.hard]
        if not soft:
            return Status(Code.SKIP)
        # domains from the feasible nodes; counts of non-hostname keys over all nodes
        domains: list[set[str]] = [set() for _ in soft]
        for node in nodes:
            if all(c.key in node.labels for c in soft):
                for i, c in enumerate(soft):
                    domains[i].add(node.labels[c.key])
        counts: list[dict[str, int]] = [defaultdict(int) for _ in soft]
        for node in self._all_nodes(nodes):
            if not node.pods:
                continue
            for i, c in enumerate(soft):
                if c.key == HOSTNAME:
                    continue
                value = node.labels.get(c.key)
                if value is not None and value in domains[i] and _eligible(pod, node, soft, c):
                    counts[i][value] += _count_matching(node, c.selector, pod.namespace)
        weights = [math.log(len(d) + 2) for d in domains]
        state.write(_SCORE_KEY, (soft, counts, weights))
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        soft, counts, weights = state.read(_SCORE_KEY)
        if not all(c.key in node.labels for c in soft):
            return -1  # ignored node: normalized to 0
        total = 0.0
        for i, c in enumerate(soft):
            value = node.labels[c.key]
            count = _count_matching(node, c.selector, pod.namespace) if c.key == HOSTNAME else counts[i].get(value, 0)
            total += score_for_count(count, c.max_skew, weights[i])
        return round(total)

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        valid = [s for s in scores if s >= 0]
        if not valid:
            scores[:] = [0] * len(scores)
            return
        lo, hi = min(valid), max(valid)
        for i, s in enumerate(scores):
            if s < 0:
                scores[i] = 0
            elif hi == 0:
                scores[i] = MAX_NODE_SCORE
            else:
                scores[i] = MAX_NODE_SCORE * (hi + lo - s) // hi

    def events_to_register(self) -> list[ClusterEventHint]:
        return [ClusterEventHint("AssignedPod", frozenset({"Add", "UpdatePodLabel", "Delete"})),
                ClusterEventHint("Node", frozenset({"Add", "UpdateNodeLabel", "UpdateNodeTaint", "Delete"}))]
