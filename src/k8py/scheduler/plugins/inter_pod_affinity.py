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

from collections import OrderedDict, defaultdict
from typing import Any, Sequence

from k8py.scheduler.framework.interfaces import MAX_NODE_SCORE, ClusterEventHint, CycleState, PreFilterResult
from k8py.scheduler.framework.status import Code, Status, unresolvable, unschedulable
from k8py.scheduler.cache.aggregate import NodeAggregate
from k8py.scheduler.framework.types import NodeInfo, PodInfo, _freeze
from k8py.scheduler.plugins.affinity_terms import pod_affinity_terms
from k8py.scheduler.plugins.names import INTER_POD_AFFINITY

__all__ = ["InterPodAffinity", "AffinityState", "compute_state", "node_contribution", "satisfies", "normalize_min_max",
           "REASON_AFFINITY", "REASON_ANTI_AFFINITY", "REASON_EXISTING_ANTI_AFFINITY"]

REASON_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
_STATE_KEY = "PreFilter" + INTER_POD_AFFINITY
Pair = tuple[str, str]


Groups = dict[Any, dict[str, int]]


def _pod_part(pod: PodInfo, existing: PodInfo, labels: dict[str, str], ns_labels: Any) -> list[tuple[Any, str, int]]:
    """What one existing pod (on a node with ``labels``) adds to the PreFilter counts for ``pod``."""
    out: list[tuple[Any, str, int]] = []
    if existing.has_required_anti_affinity:
        for term in pod_affinity_terms(existing).anti_affinity:
            value = labels.get(term.topology_key)
            if value is not None and term.matches(pod, ns_labels):
                out.append((("ea", term.topology_key), value, 1))
    terms = pod_affinity_terms(pod)
    if terms.affinity and all(t.matches(existing, ns_labels) for t in terms.affinity):
        for t in terms.affinity:
            value = labels.get(t.topology_key)
            if value is not None:
                out.append((("a", t.topology_key), value, 1))
    for t in terms.anti_affinity:
        value = labels.get(t.topology_key)
        if value is not None and t.matches(existing, ns_labels):
            out.append((("x", t.topology_key), value, 1))
    return out


def node_contribution(pod: PodInfo, node: NodeInfo, ns_labels: Any = None) -> list[tuple[Any, str, int]]:
    """The PreFilter counts ``node`` adds for ``pod``: all its pods when the pod has
    required terms, else only its pods with required anti-affinity."""
    pods = node.pods.values() if pod_affinity_terms(pod).has_required else node.pods_with_required_anti_affinity.values()
    out: list[tuple[Any, str, int]] = []
    for existing in pods:
        out.extend(_pod_part(pod, existing, node.labels, ns_labels))
    return out


class AffinityState:
    """Counts per ``(kind, topologyKey) -> value -> n`` with kinds ``ea`` (existing
    pods' anti-affinity), ``a`` (the pod's affinity) and ``x`` (its anti-affinity).
    Shared with the aggregate it came from until preemption changes it (copy on write)."""

    __slots__ = ("groups", "pod", "ns_labels", "owned")

    def __init__(self, pod: PodInfo, groups: Groups | None = None, ns_labels: Any = None) -> None:
        self.pod = pod
        self.ns_labels = ns_labels
        self.groups: Groups = groups if groups is not None else {}
        self.owned = groups is None

    def clone(self) -> AffinityState:
        c = AffinityState(self.pod, {g: dict(v) for g, v in self.groups.items()}, self.ns_labels)
        c.owned = True
        return c

    def count(self, kind: str, key: str, value: str) -> int:
        values = self.groups.get((kind, key))
        return values.get(value, 0) if values else 0

    def update_with(self, existing: PodInfo, node: NodeInfo, sign: int) -> None:
        """Count (sign=+1) or uncount (-1) one existing pod on ``node``."""
        if not self.owned:
            self.groups = {g: dict(v) for g, v in self.groups.items()}
            self.owned = True
        for group, value, n in _pod_part(self.pod, existing, node.labels, self.ns_labels):
            values = self.groups.setdefault(group, {})
            values[value] = values.get(value, 0) + sign * n


def compute_state(pod: PodInfo, nodes: Sequence[NodeInfo], ns_labels: Any = None) -> AffinityState:
    """The PreFilter counts over ``nodes``, computed from scratch (the plugin keeps
    them incrementally instead; see :class:`~k8py.scheduler.cache.aggregate.NodeAggregate`)."""
    state = AffinityState(pod, None, ns_labels)
    for node in nodes:
        for group, value, n in node_contribution(pod, node, ns_labels):
            values = state.groups.setdefault(group, {})
            values[value] = values.get(value, 0) + n
    return state


def satisfies(state: AffinityState, node: NodeInfo) -> Status | None:
    terms = pod_affinity_terms(state.pod)
    labels = node.labels
    if terms.affinity:
        ok = True
        for t in terms.affinity:
            value = labels.get(t.topology_key)
            if value is None or state.count("a", t.topology_key, value) <= 0:
                ok = False
                break
        if not ok:
            # the first pod of a group that selects itself may go anywhere with the keys
            none_anywhere = not any(n > 0 for (kind, _), values in state.groups.items() if kind == "a" for n in values.values())
            self_match = all(t.matches(state.pod, state.ns_labels) for t in terms.affinity)
            if not (none_anywhere and self_match and all(t.topology_key in labels for t in terms.affinity)):
                return unresolvable(REASON_AFFINITY)
    for t in terms.anti_affinity:
        value = labels.get(t.topology_key)
        if value is not None and state.count("x", t.topology_key, value) > 0:
            return unschedulable(REASON_ANTI_AFFINITY)
    for (kind, key), values in state.groups.items():
        if kind == "ea":
            value = labels.get(key)
            if value is not None and values.get(value, 0) > 0:
                return unschedulable(REASON_EXISTING_ANTI_AFFINITY)
    return None


def normalize_min_max(scores: list[int]) -> None:
    if not scores:
        return
    lo, hi = min(scores), max(scores)
    span = hi - lo
    for i, s in enumerate(scores):
        scores[i] = MAX_NODE_SCORE * (s - lo) // span if span > 0 else 0


class InterPodAffinity:
    name = INTER_POD_AFFINITY
    MAX_SHAPES = 16

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        self.handle = handle
        self.hard_weight = int((args or {}).get("hardPodAffinityWeight", 1))
        self._filter_aggregates: OrderedDict[Any, NodeAggregate] = OrderedDict()
        self._score_aggregates: OrderedDict[Any, NodeAggregate] = OrderedDict()

    def _ns_labels(self) -> Any:
        return getattr(self.handle, "namespace_labels", None)

    def _cache(self) -> Any:
        return getattr(self.handle, "cache", None)

    def _shape(self, pod: PodInfo) -> Any:
        digest = pod.memo.get("inter-pod-affinity-shape")
        if digest is None:
            digest = pod.memo["inter-pod-affinity-shape"] = (
                pod.namespace, _freeze(pod.labels), _freeze(pod.affinity.get("podAffinity")),
                _freeze(pod.affinity.get("podAntiAffinity")))
        return (digest, getattr(self.handle, "namespace_generation", 0))

    def _aggregate(self, table: OrderedDict[Any, NodeAggregate], pod: PodInfo, contribution: Any) -> Groups:
        cache = self._cache()
        key = self._shape(pod)
        agg = table.get(key)
        if agg is None:
            agg = table[key] = NodeAggregate(contribution)
            if len(table) > self.MAX_SHAPES:
                table.popitem(last=False)
        else:
            table.move_to_end(key)
        return agg.refresh(cache)

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> tuple[PreFilterResult | None, Status | None]:
        terms = pod_affinity_terms(pod)
        cache = self._cache()
        if cache is None:
            if not terms.has_required and not any(n.pods_with_required_anti_affinity for n in nodes):
                return None, Status(Code.SKIP)
            state.write(_STATE_KEY, compute_state(pod, nodes, self._ns_labels()))
            return None, None
        if not terms.has_required and not cache.anti_affinity_nodes:
            return None, Status(Code.SKIP)
        ns_labels = self._ns_labels()
        groups = self._aggregate(self._filter_aggregates, pod, lambda node: node_contribution(pod, node, ns_labels))
        state.write(_STATE_KEY, AffinityState(pod, groups, ns_labels))
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

    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo], failed: dict[str, Status]) -> list[NodeInfo]:
        """The batch form: with no required affinity (the common case: anti-affinity
        only), each node is a few dict lookups; otherwise per node :func:`satisfies`."""
        s: AffinityState | None = state.read(_STATE_KEY)
        if s is None:
            return nodes
        if pod_affinity_terms(pod).affinity:
            out = []
            for node in nodes:
                status = satisfies(s, node)
                if status is None:
                    out.append(node)
                else:
                    failed[node.name] = status.with_plugin(self.name)
            return out
        anti = [(t.topology_key, s.groups.get(("x", t.topology_key))) for t in pod_affinity_terms(pod).anti_affinity]
        anti = [(k, v) for k, v in anti if v]
        existing = [(key, values) for (kind, key), values in s.groups.items() if kind == "ea" and values]
        if not anti and not existing:
            return nodes
        statuses = {REASON_ANTI_AFFINITY: unschedulable(REASON_ANTI_AFFINITY).with_plugin(self.name),
                    REASON_EXISTING_ANTI_AFFINITY: unschedulable(REASON_EXISTING_ANTI_AFFINITY).with_plugin(self.name)}
        out = []
        for node in nodes:
            labels = node.labels
            reason = ""
            for key, values in anti:
                value = labels.get(key)
                if value is not None and values.get(value, 0) > 0:
                    reason = REASON_ANTI_AFFINITY
                    break
            if not reason:
                for key, values in existing:
                    value = labels.get(key)
                    if value is not None and values.get(value, 0) > 0:
                        reason = REASON_EXISTING_ANTI_AFFINITY
                        break
            if reason:
                failed[node.name] = statuses[reason]  # shared: statuses are never changed once made
            else:
                out.append(node)
        return out

    # -- scoring --------------------------------------------------------------------------

    def _score_contribution(self, pod: PodInfo, node: NodeInfo, ns_labels: Any) -> list[tuple[Any, str, int]]:
        terms = pod_affinity_terms(pod)
        scores: dict[Pair, int] = defaultdict(int)
        pods = node.pods.values() if terms.has_preferred else node.pods_with_affinity.values()
        for existing in pods:
            self._score_pair(pod, terms, existing, node.labels, scores, ns_labels)
        return [(("s", key), value, n) for (key, value), n in scores.items() if n]

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        terms = pod_affinity_terms(pod)
        cache = self._cache()
        ns_labels = self._ns_labels()
        if cache is not None:
            if not terms.has_preferred and not cache.affinity_nodes:
                return Status(Code.SKIP)
            groups = self._aggregate(self._score_aggregates, pod, lambda node: self._score_contribution(pod, node, ns_labels))
        else:
            agg = NodeAggregate(lambda node: self._score_contribution(pod, node, ns_labels))
            groups = agg.refresh(_ListCache(nodes))
        if not groups:
            return Status(Code.SKIP)
        state.write("PreScore" + self.name, [(key, values) for (_, key), values in groups.items()])
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
        labels = node.labels
        total = 0
        for key, values in state.read("PreScore" + self.name) or ():
            value = labels.get(key)
            if value is not None:
                total += values.get(value, 0)
        return total

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        normalize_min_max(scores)

    def events_to_register(self) -> list[ClusterEventHint]:
        return [ClusterEventHint("AssignedPod", frozenset({"Add", "UpdatePodLabel", "Delete"})),
                ClusterEventHint("Node", frozenset({"Add", "UpdateNodeLabel"}))]


class _ListCache:
    """A one-off view of a node list as the aggregate's cache (no handle cache)."""

    def __init__(self, nodes: Sequence[NodeInfo]) -> None:
        self._nodes = list(nodes)
        self.generation = 0

    def all_infos(self) -> list[NodeInfo]:
        return self._nodes
