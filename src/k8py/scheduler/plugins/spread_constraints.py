"""PodTopologySpread's constraints and counts (upstream ``podtopologyspread``'s
``common.go`` and the PreFilter state of ``filtering.go``), pure over a pod and
node views: what :mod:`.pod_topology_spread` (the plugin) filters and scores with.

- :class:`Constraint`: one ``topologySpreadConstraints`` entry (or a cluster
  default) with its selector (``matchLabelKeys`` merged in) and policies;
  :func:`constraints_of` a pod's, memoized on the pod.
- Counting: :func:`count_matching` (a node's pods a selector matches in a
  namespace, deleting pods apart), :func:`kept_count` (the same, kept on the
  node while its pods are unchanged), :func:`eligible` (whether a node's
  domain counts at all: every key, the node affinity and taint policies).
- Filtering: :class:`SpreadState` (matching pods and eligible nodes per
  domain, copy on write), built by :func:`spread_state` from scratch or by the
  plugin incrementally from :func:`node_contribution`; :func:`check_node`.
"""

from __future__ import annotations

from typing import Any, Sequence

from k8py.api.selectors import LabelSelector, Operator, Requirement, label_selector_from_dict
from k8py.scheduler.framework.status import Status, unresolvable, unschedulable
from k8py.scheduler.framework.types import NodeInfo, PodInfo
from k8py.scheduler.plugins.node_affinity import required_affinity
from k8py.scheduler.plugins.taint_toleration import first_untolerated

__all__ = ["Constraint", "SpreadState", "constraints_of", "count_matching", "kept_count", "eligible", "node_contribution",
           "state_from", "spread_state", "check_node", "score_for_count", "DEFAULT_CONSTRAINTS",
           "REASON_MISSING_LABEL", "REASON_CONSTRAINTS", "HOSTNAME", "ZONE"]

REASON_MISSING_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"
REASON_CONSTRAINTS = "node(s) didn't match pod topology spread constraints"
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
DEFAULT_CONSTRAINTS = [
    {"topologyKey": HOSTNAME, "whenUnsatisfiable": "ScheduleAnyway", "maxSkew": 3},
    {"topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway", "maxSkew": 5},
]
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
        #: what a node's count of matching pods is kept under (:func:`kept_count`), with the namespace
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


def count_matching(node: NodeInfo, selector: LabelSelector, namespace: str) -> int:
    n = 0
    for p in node.pods.values():
        if p.namespace == namespace and selector.matches(p.labels) and not (p.pod.get("metadata") or {}).get("deletionTimestamp"):
            n += 1
    return n


_MAX_COUNTS = 64


def kept_count(node: NodeInfo, c: Constraint, namespace: str) -> int:
    """:func:`count_matching` of ``c``'s selector, kept on the node while its pods are unchanged
    (its ``generation``): every pod of a workload counts the same pods on every node it scores."""
    key = c.count_key
    if key is None or key[0] != namespace:
        return count_matching(node, c.selector, namespace)
    counts = node.match_counts
    kept = counts.get(key)
    if kept is not None and kept[0] == node.generation:
        return kept[1]
    n = count_matching(node, c.selector, namespace)
    if len(counts) >= _MAX_COUNTS:
        counts.clear()
    counts[key] = (node.generation, n)
    return n


def eligible(pod: PodInfo, node: NodeInfo, constraints: Sequence[Constraint], c: Constraint) -> bool:
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
        if not eligible(pod, node, constraints, c):
            continue
        value = node.labels[c.key]
        out.append((("dom", i), value, 1))
        if node.pods:
            n = count_matching(node, c.selector, pod.namespace)
            if n:
                out.append((("cnt", i), value, n))
    return out


def state_from(pod: PodInfo, constraints: list[Constraint], groups: dict[Any, dict[str, int]]) -> SpreadState:
    return SpreadState(pod, constraints, [groups.get(("cnt", i)) or {} for i in range(len(constraints))],
                       [groups.get(("dom", i)) or {} for i in range(len(constraints))])


def spread_state(pod: PodInfo, nodes: Sequence[NodeInfo], constraints: list[Constraint]) -> SpreadState:
    """The PreFilter counts over ``nodes`` from scratch (the plugin keeps them incrementally)."""
    groups: dict[Any, dict[str, int]] = {}
    for node in nodes:
        for group, value, n in node_contribution(pod, node, constraints):
            values = groups.setdefault(group, {})
            values[value] = values.get(value, 0) + n
    state = state_from(pod, constraints, groups)
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
