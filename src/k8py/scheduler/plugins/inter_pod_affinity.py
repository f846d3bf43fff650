"""InterPodAffinity: required pod affinity and anti-affinity (Filter) and the
preferred terms of both the incoming and the existing pods (Score), as
upstream's ``interpodaffinity`` plugin.

PreFilter counts, per topology pair ``(topologyKey, value)``:

- existing pods whose *required anti-affinity* selects the incoming pod;
- existing pods matching *all* the incoming pod's required affinity terms;
- existing pods matching any of its required anti-affinity terms.

Filter then, for a node with label ``value`` for the key: affinity needs a
count > 0 for every term (or, when no pod matches anywhere, the pod matching
its own terms: the first of a group) — UnschedulableAndUnresolvable; the
pod's anti-affinity and existing pods' anti-affinity need count 0 —
Unschedulable (preemption can remove the offending pods).

Score sums, per topology pair, the weights of matching preferred terms (+ for
affinity, − for anti-affinity, existing pods' required affinity with
``hardPodAffinityWeight``) and normalizes min–max to [0, 100].
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Sequence

from k8py.scheduler.framework.interfaces import MAX_NODE_SCORE, ClusterEventHint, CycleState, PreFilterResult
from k8py.scheduler.framework.status import Code, Status, unresolvable, unschedulable
from k8py.scheduler.framework.types import NodeInfo, PodInfo
from k8py.scheduler.plugins.affinity_terms import pod_affinity_terms
from k8py.scheduler.plugins.names import INTER_POD_AFFINITY

__all__ = ["InterPodAffinity", "AffinityState", "compute_state", "satisfies", "normalize_min_max",
           "REASON_AFFINITY", "REASON_ANTI_AFFINITY", "REASON_EXISTING_ANTI_AFFINITY"]

REASON_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
_STATE_KEY = "PreFilter" + INTER_POD_AFFINITY
Pair = tuple[str, str]


class AffinityState:
    __slots__ = ("existing_anti", "affinity", "anti", "pod", "ns_labels", "_anti_keys")

    def __init__(self, pod: PodInfo, ns_labels: Any = None) -> None:
        self.pod = pod
        self.ns_labels = ns_labels
        self.existing_anti: dict[Pair, int] = defaultdict(int)
        self.affinity: dict[Pair, int] = defaultdict(int)
        self.anti: dict[Pair, int] = defaultdict(int)
        self._anti_keys: set[str] | None = None

    def clone(self) -> AffinityState:
        c = AffinityState(self.pod, self.ns_labels)
        c.existing_anti.update(self.existing_anti)
        c.affinity.update(self.affinity)
        c.anti.update(self.anti)
        return c

    def update_with(self, existing: PodInfo, node: NodeInfo, sign: int) -> None:
        """Count (sign=+1) or uncount (-1) one existing pod on ``node``."""
        self._anti_keys = None
        labels = node.labels
        if existing.has_required_anti_affinity:
            for term in pod_affinity_terms(existing).anti_affinity:
                value = labels.get(term.topology_key)
                if value is not None and term.matches(self.pod, self.ns_labels):
                    self.existing_anti[(term.topology_key, value)] += sign
        terms = pod_affinity_terms(self.pod)
        if terms.affinity and all(t.matches(existing, self.ns_labels) for t in terms.affinity):
            for t in terms.affinity:
                value = labels.get(t.topology_key)
                if value is not None:
                    self.affinity[(t.topology_key, value)] += sign
        for t in terms.anti_affinity:
            value = labels.get(t.topology_key)
            if value is not None and t.matches(existing, self.ns_labels):
                self.anti[(t.topology_key, value)] += sign


def compute_state(pod: PodInfo, nodes: Sequence[NodeInfo], anti_affinity_nodes: Any = None, ns_labels: Any = None) -> AffinityState:
    """The PreFilter counts over ``nodes`` (all pods when the incoming pod has
    required terms, else only pods with required anti-affinity)."""
    state = AffinityState(pod, ns_labels)
    terms = pod_affinity_terms(pod)
    for node in nodes:
        if terms.has_required:
            pods = node.pods.values()
        elif anti_affinity_nodes is None or node.name in anti_affinity_nodes:
            pods = node.pods_with_required_anti_affinity.values()
        else:
            continue
        for existing in pods:
            state.update_with(existing, node, +1)
    return state


def satisfies(state: AffinityState, node: NodeInfo) -> Status | None:
    terms = pod_affinity_terms(state.pod)
    labels = node.labels
    if terms.affinity:
        ok = True
        for t in terms.affinity:
            value = labels.get(t.topology_key)
            if value is None or state.affinity.get((t.topology_key, value), 0) <= 0:
                ok = False
                break
        if not ok:
            # the first pod of a group that selects itself may go anywhere with the keys
            none_anywhere = not any(v > 0 for v in state.affinity.values())
            self_match = all(t.matches(state.pod, state.ns_labels) for t in terms.affinity)
            if not (none_anywhere and self_match and all(t.topology_key in labels for t in terms.affinity)):
                return unresolvable(REASON_AFFINITY)
    for t in terms.anti_affinity:
        value = labels.get(t.topology_key)
        if value is not None and state.anti.get((t.topology_key, value), 0) > 0:
            return unschedulable(REASON_ANTI_AFFINITY)
    if state.existing_anti:
        for key in _keys(state):
            value = labels.get(key)
            if value is not None and state.existing_anti.get((key, value), 0) > 0:
                return unschedulable(REASON_EXISTING_ANTI_AFFINITY)
    return None


def _keys(state: AffinityState) -> set[str]:
    """The topology keys existing anti-affinity uses (computed once per state)."""
    keys = state._anti_keys
    if keys is None:
        keys = state._anti_keys = {k for (k, _) in state.existing_anti}
    return keys


def normalize_min_max(scores: list[int]) -> None:
    if not scores:
        return
    lo, hi = min(scores), max(scores)
    span = hi - lo
    for i, s in enumerate(scores):
        scores[i] = MAX_NODE_SCORE * (s - lo) // span if span > 0 else 0


class InterPodAffinity:
    name = INTER_POD_AFFINITY

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        self.handle = handle
        self.hard_weight = int((args or {}).get("hardPodAffinityWeight", 1))

    def _ns_labels(self) -> Any:
        return getattr(self.handle, "namespace_labels", None)

    def _anti_nodes(self) -> Any:
        return getattr(getattr(self.handle, "cache", None), "anti_affinity_nodes", None)

    def _affinity_nodes(self) -> Any:
        return getattr(getattr(self.handle, "cache", None), "affinity_nodes", None)

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> tuple[PreFilterResult | None, Status | None]:
        terms = pod_affinity_terms(pod)
        anti_nodes = self._anti_nodes()
        if not terms.has_required and anti_nodes is not None and not anti_nodes:
            return None, Status(Code.SKIP)
        if not terms.has_required and anti_nodes is not None:
            lookup = self.handle.node
            scan = [n for n in (lookup(name) for name in anti_nodes) if n is not None]
        else:
            scan = list(nodes)
        state.write(_STATE_KEY, compute_state(pod, scan, anti_nodes, self._ns_labels()))
        return None, None

    def add_pod(self, state: CycleState, pod: PodInfo, add: PodInfo, node: NodeInfo) -> None:
        s = state.read(_STATE_KEY)
        if s is not None:
            s.update_with(add, node, +1)

    def remove_pod(self, state: CycleState, pod: PodInfo, remove: PodInfo, node: NodeInfo) -> None:
        s = state.read(_STATE_KEY)
        if s is not None:
            s.update_with(remove, node, -1)

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        s = state.read(_STATE_KEY)
        return satisfies(s, node) if s is not None else None

    # -- scoring --------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        terms = pod_affinity_terms(pod)
        affinity_nodes = self._affinity_nodes()
        if not terms.has_preferred and affinity_nodes is not None and not affinity_nodes:
            return Status(Code.SKIP)
        ns_labels = self._ns_labels()
        scores: dict[Pair, int] = defaultdict(int)
        all_nodes = self.handle.nodes if self.handle is not None else nodes
        for node in all_nodes:
            pods = node.pods.values() if terms.has_preferred else node.pods_with_affinity.values()
            labels = node.labels
            for existing in pods:
                self._score_pair(pod, terms, existing, labels, scores, ns_labels)
        if not any(scores.values()):
            return Status(Code.SKIP)
        state.write("PreScore" + self.name, scores)
        return None

    def _score_pair(self, pod: PodInfo, terms: Any, existing: PodInfo, labels: dict[str, str],
                    scores: dict[Pair, int], ns_labels: Any) -> None:
        for wt in terms.preferred_affinity:
            v = labels.get(wt.term.topology_key)
            if v is not None and wt.term.matches(existing, ns_labels):
                scores[(wt.term.topology_key, v)] += wt.weight
        for wt in terms.preferred_anti_affinity:
            v = labels.get(wt.term.topology_key)
            if v is not None and wt.term.matches(existing, ns_labels):
                scores[(wt.term.topology_key, v)] -= wt.weight
        if existing.has_pod_affinity:
            other = pod_affinity_terms(existing)
            if self.hard_weight > 0:
                for t in other.affinity:
                    v = labels.get(t.topology_key)
                    if v is not None and t.matches(pod, ns_labels):
                        scores[(t.topology_key, v)] += self.hard_weight
            for wt in other.preferred_affinity:
                v = labels.get(wt.term.topology_key)
                if v is not None and wt.term.matches(pod, ns_labels):
                    scores[(wt.term.topology_key, v)] += wt.weight
            for wt in other.preferred_anti_affinity:
                v = labels.get(wt.term.topology_key)
                if v is not None and wt.term.matches(pod, ns_labels):
                    scores[(wt.term.topology_key, v)] -= wt.weight

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        scores = state.read("PreScore" + self.name) or {}
        return sum(scores.get((k, v), 0) for k, v in node.labels.items())

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        normalize_min_max(scores)

    def events_to_register(self) -> list[ClusterEventHint]:
        return [ClusterEventHint("AssignedPod", frozenset({"Add", "UpdatePodLabel", "Delete"})),
                ClusterEventHint("Node", frozenset({"Add", "UpdateNodeLabel"}))]
