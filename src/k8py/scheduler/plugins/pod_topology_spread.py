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
  weighted by ``log(domains + 2)``; normalized so the emptiest gets 100. A node
  without every key is not scored (0), except under the System defaults, where
  the constraints whose key it has still score it (upstream's
  ``requireAllTopologies``): zone-less nodes are still spread by hostname.
- A pod with no constraints gets the cluster defaults (hostname maxSkew 3,
  zone maxSkew 5, both ScheduleAnyway) when a controller owns it; k8py
  selects by the pod's own labels there (upstream merges the selectors of the
  Services and workloads selecting the pod).
"""

from __future__ import annotations

import math
from collections import OrderedDict, defaultdict
from typing import Any, Sequence

from k8py.api.selectors import LabelSelector, Operator, Requirement, label_selector_from_dict
from k8py.scheduler.cache.aggregate import NodeAggregate
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
    __slots__ = ("max_skew", "key", "hard", "selector", "min_domains", "honor_affinity", "honor_taints", "count_key")

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
        #: what a node's count of matching pods is kept under (:func:`_count_on`), with the namespace
        self.count_key = None if selector.nothing else (pod.namespace, selector.to_string())
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


_MAX_COUNTS = 64


def _count_on(node: NodeInfo, c: Constraint, namespace: str) -> int:
    """:func:`_count_matching` of ``c``'s selector, kept on the node while its pods are unchanged
    (its ``generation``): every pod of a workload counts the same pods on every node it scores."""
    key = c.count_key
    if key is None or key[0] != namespace:
        return _count_matching(node, c.selector, namespace)
    counts = node.match_counts
    kept = counts.get(key)
    if kept is not None and kept[0] == node.generation:
        return kept[1]
    n = _count_matching(node, c.selector, namespace)
    if len(counts) >= _MAX_COUNTS:
        counts.clear()
    counts[key] = (node.generation, n)
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
    """Per constraint: matching pods per domain (``counts``) and the eligible
    domains (``domains``: value -> eligible nodes). Shared with the aggregate it
    came from until preemption changes it (copy on write)."""

    __slots__ = ("constraints", "counts", "domains", "pod", "owned", "_mins")

    def __init__(self, pod: PodInfo, constraints: list[Constraint], counts: list[dict[str, int]] | None = None,
                 domains: list[dict[str, int]] | None = None) -> None:
        self.pod = pod
        self.constraints = constraints
        self.counts: list[dict[str, int]] = counts if counts is not None else [{} for _ in constraints]
        self.domains: list[dict[str, int]] = domains if domains is not None else [{} for _ in constraints]
        self.owned = counts is None
        self._mins: list[int | None] = [None] * len(constraints)

    def clone(self) -> SpreadState:
        c = SpreadState(self.pod, self.constraints, [dict(d) for d in self.counts], [dict(d) for d in self.domains])
        c.owned = True
        return c

    def min_match(self, i: int) -> int:
        cached = self._mins[i]
        if cached is None:
            c = self.constraints[i]
            if len(self.domains[i]) < c.min_domains:
                cached = 0
            else:
                counts = self.counts[i]
                cached = min((counts.get(d, 0) for d in self.domains[i]), default=0)
            self._mins[i] = cached
        return cached

    def update_with(self, existing: PodInfo, node: NodeInfo, sign: int) -> None:
        if not self.owned:
            self.counts = [dict(d) for d in self.counts]
            self.domains = [dict(d) for d in self.domains]
            self.owned = True
        self._mins = [None] * len(self.constraints)
        for i, c in enumerate(self.constraints):
            value = node.labels.get(c.key)
            if value is None or value not in self.domains[i] or existing.namespace != self.pod.namespace:
                continue
            if c.selector.matches(existing.labels):
                self.counts[i][value] = self.counts[i].get(value, 0) + sign


def node_contribution(pod: PodInfo, node: NodeInfo, constraints: Sequence[Constraint]) -> list[tuple[Any, str, int]]:
    """What ``node`` adds for ``pod``: per eligible constraint, its domain and its matching pods."""
    out: list[tuple[Any, str, int]] = []
    for i, c in enumerate(constraints):
        if not _eligible(pod, node, constraints, c):
            continue
        value = node.labels[c.key]
        out.append((("dom", i), value, 1))
        if node.pods:
            n = _count_matching(node, c.selector, pod.namespace)
            if n:
                out.append((("cnt", i), value, n))
    return out


def _state_from(pod: PodInfo, constraints: list[Constraint], groups: dict[Any, dict[str, int]]) -> SpreadState:
    return SpreadState(pod, constraints, [groups.get(("cnt", i)) or {} for i in range(len(constraints))],
                       [groups.get(("dom", i)) or {} for i in range(len(constraints))])


def spread_state(pod: PodInfo, nodes: Sequence[NodeInfo], constraints: list[Constraint]) -> SpreadState:
    """The PreFilter counts over ``nodes`` from scratch (the plugin keeps them incrementally)."""
    groups: dict[Any, dict[str, int]] = {}
    for node in nodes:
        for group, value, n in node_contribution(pod, node, constraints):
            values = groups.setdefault(group, {})
            values[value] = values.get(value, 0) + n
    state = _state_from(pod, constraints, groups)
    state.owned = True
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
        self.system_defaulted = policy == "System"
        self.defaults = DEFAULT_CONSTRAINTS if self.system_defaulted else list(args.get("defaultConstraints") or ())
        self._aggregates: OrderedDict[Any, NodeAggregate] = OrderedDict()
        #: (namespace, selector) -> each node's count of the pods it matches (by node name)
        self._host_counts: OrderedDict[Any, NodeAggregate] = OrderedDict()

    def _all_nodes(self, nodes: Sequence[NodeInfo]) -> Sequence[NodeInfo]:
        return self.handle.nodes if self.handle is not None else nodes

    def _shape(self, pod: PodInfo, constraints: list[Constraint]) -> Any:
        parts: list[Any] = [pod.namespace]
        for c in constraints:
            parts.append((c.key, c.selector.to_string(), c.selector.nothing, c.honor_affinity, c.honor_taints))
        if any(c.honor_affinity for c in constraints):
            parts.append(pod.shape("node-affinity"))
        if any(c.honor_taints for c in constraints):
            parts.append(pod.shape("tolerations"))
        return tuple(parts)

    def _kept_host_counts(self, c: Constraint) -> dict[str, int] | None:
        """Node name -> how many of its pods ``c`` counts (absent: none), kept up to date from
        the cache's changes; None without a cache."""
        cache = getattr(self.handle, "cache", None)
        if cache is None or c.count_key is None:
            return None
        agg = self._host_counts.get(c.count_key)
        if agg is None:
            namespace, selector = c.count_key[0], c.selector
            agg = self._host_counts[c.count_key] = NodeAggregate(
                lambda node: [("host", node.name, n)] if (n := _count_matching(node, selector, namespace)) else ())
            if len(self._host_counts) > 16:
                self._host_counts.popitem(last=False)
        else:
            self._host_counts.move_to_end(c.count_key)
        return agg.refresh(cache).get("host") or {}

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> tuple[PreFilterResult | None, Status | None]:
        hard = [c for c in constraints_of(pod, self.defaults) if c.hard]
        if not hard:
            return None, Status(Code.SKIP)
        cache = getattr(self.handle, "cache", None)
        if cache is None:
            state.write(_FILTER_KEY, spread_state(pod, nodes, hard))
            return None, None
        key = self._shape(pod, hard)
        agg = self._aggregates.get(key)
        if agg is None:
            agg = self._aggregates[key] = NodeAggregate(lambda node: node_contribution(pod, node, hard))
            if len(self._aggregates) > 16:
                self._aggregates.popitem(last=False)
        else:
            self._aggregates.move_to_end(key)
        state.write(_FILTER_KEY, _state_from(pod, hard, agg.refresh(cache)))
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

    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo], failed: dict[str, Status]) -> list[NodeInfo]:
        """The batch form of :func:`check_node`: per constraint, the pod's own match and
        the minimum are computed once; each node is then a lookup and a compare."""
        s: SpreadState | None = state.read(_FILTER_KEY)
        if s is None:
            return nodes
        # a node passes constraint i while count[value] <= limit_i
        checks = [(c.key, s.counts[i], c.max_skew + s.min_match(i) - (1 if c.selector.matches(pod.labels) else 0))
                  for i, c in enumerate(s.constraints)]
        missing = unresolvable(REASON_MISSING_LABEL).with_plugin(self.name)
        skewed = unschedulable(REASON_CONSTRAINTS).with_plugin(self.name)
        out = []
        for node in nodes:
            labels = node.labels
            for key, counts, limit in checks:
                value = labels.get(key)
                if value is None:
                    failed[node.name] = missing
                    break
                if counts.get(value, 0) > limit:
                    failed[node.name] = skewed
                    break
            else:
                out.append(node)
        return out

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        soft = [c for c in constraints_of(pod, self.defaults) if not c.hard]
        if not soft:
            return Status(Code.SKIP)
        # as upstream: a node without every key is ignored, unless the constraints are the
        # System defaults (then a node without a zone is still spread by hostname)
        require_all = bool(pod.spec.get("topologySpreadConstraints")) or not self.system_defaulted
        if require_all:
            keys = [c.key for c in soft]
            nodes = [n for n in nodes if all(k in n.labels for k in keys)]
        scored = len(nodes)
        # the domains among the feasible nodes scored, for the keys other than the hostname
        # (each node is its own hostname domain: the hostname's weight is from ``scored``)
        cache = getattr(self.handle, "cache", None)
        domains: list[set[str]] = [
            set() if c.key == HOSTNAME or (cache is not None and not cache.label_key_node_count(c.key))
            else {n.labels.get(c.key) for n in nodes} - {None} for c in soft]  # type: ignore[misc]
        if not require_all and not all(domains[i] for i, c in enumerate(soft) if c.key != HOSTNAME):
            # a key no feasible node has scores no node: left out (a zone, on zone-less nodes)
            kept = [i for i, c in enumerate(soft) if c.key == HOSTNAME or domains[i]]
            soft, domains = [soft[i] for i in kept], [domains[i] for i in kept]
            if not soft:
                return Status(Code.SKIP)
        # the hostname's counts by node name (None: counted per node when scored); the other keys'
        # by domain
        counts: list[dict[str, int] | None] = [self._kept_host_counts(c) if c.key == HOSTNAME else defaultdict(int)
                                               for c in soft]
        # only constraints with a domain among the feasible nodes need the pass over every
        # node (none when no node has a zone: 5,000 nodes a pod for nothing)
        counted = [i for i, c in enumerate(soft) if c.key != HOSTNAME and domains[i]]
        if counted:
            required = soft if require_all else ()
            for node in self._all_nodes(nodes):
                if not node.pods:
                    continue
                for i in counted:
                    c = soft[i]
                    value = node.labels.get(c.key)
                    if value is not None and value in domains[i] and _eligible(pod, node, required, c):
                        counts[i][value] += _count_on(node, c, pod.namespace)  # type: ignore[index]
        weights = [math.log((scored if c.key == HOSTNAME else len(domains[i])) + 2) for i, c in enumerate(soft)]
        state.write(_SCORE_KEY, (soft, counts, weights, require_all))
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        soft, counts, weights, require_all = state.read(_SCORE_KEY)
        labels = node.labels
        if require_all and not all(c.key in labels for c in soft):
            return -1  # ignored node: normalized to 0
        total = 0.0
        for i, c in enumerate(soft):
            value = labels.get(c.key)
            if value is None:  # (only with the System defaults: that constraint does not score it)
                continue
            kept = counts[i]
            if kept is None:
                count = _count_on(node, c, pod.namespace)
            else:
                count = kept.get(node.name if c.key == HOSTNAME else value, 0)
            total += score_for_count(count, c.max_skew, weights[i])
        return round(total)

    def score_nodes(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> list[int]:
        """The batch form of :meth:`score` (the same sums in the same order): per
        constraint, one pass over the nodes for their counts; with one constraint,
        each count's score is computed once."""
        soft, counts, weights, require_all = state.read(_SCORE_KEY)
        namespace = pod.namespace
        found_by: list[list[int | None]] = []
        for i, c in enumerate(soft):
            key, kept = c.key, counts[i]
            if kept is None:
                found = [_count_on(n, c, namespace) if key in n.labels else None for n in nodes]
            elif key == HOSTNAME:
                found = [kept.get(n.name, 0) if key in n.labels else None for n in nodes]
            else:
                found = [None if (value := n.labels.get(key)) is None else kept.get(value, 0) for n in nodes]
            found_by.append(found)
        if len(soft) == 1:
            weight, base = weights[0], soft[0].max_skew - 1
            by_count = {n: 0 if n is None else round(n * weight + base) for n in set(found_by[0])}
            scores = list(map(by_count.__getitem__, found_by[0]))
        else:
            totals: list[float] = [0.0] * len(nodes)
            for i, found in enumerate(found_by):
                weight, base = weights[i], soft[i].max_skew - 1
                totals = [t if n is None else t + (n * weight + base) for t, n in zip(totals, found)]
            scores = [round(t) for t in totals]
        if require_all:
            keys = [c.key for c in soft]
            for k, n in enumerate(nodes):
                if not all(key in n.labels for key in keys):
                    scores[k] = -1  # ignored node: normalized to 0
        return scores

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        lowest = min(scores, default=0)
        if lowest < 0:  # ignored nodes (-1): 0, and left out of the range
            valid = [s for s in scores if s >= 0]
            if not valid:
                scores[:] = [0] * len(scores)
                return
            lo, hi = min(valid), max(valid)
        else:
            lo, hi = lowest, max(scores, default=0)
        if hi == 0:
            scores[:] = [0 if s < 0 else MAX_NODE_SCORE for s in scores]
        else:
            top = MAX_NODE_SCORE * (hi + lo)
            scores[:] = [0 if s < 0 else (top - MAX_NODE_SCORE * s) // hi for s in scores]

    def events_to_register(self) -> list[ClusterEventHint]:
        return [ClusterEventHint("AssignedPod", frozenset({"Add", "UpdatePodLabel", "Delete"})),
                ClusterEventHint("Node", frozenset({"Add", "UpdateNodeLabel", "UpdateNodeTaint", "Delete"}))]
