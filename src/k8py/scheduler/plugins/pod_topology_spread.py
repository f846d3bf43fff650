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

The constraints and the counting are :mod:`.spread_constraints`; this module
is the plugin: it keeps per pod shape the cluster-wide sums (the PreFilter's
domains and counts, each workload's count per node for the hostname score) up
to date from the cache's changes (:class:`~k8py.scheduler.cache.aggregate.NodeAggregate`),
so a cycle pays for the nodes that changed, and scores in a batch.
"""

from __future__ import annotations

import math
from collections import OrderedDict, defaultdict
from itertools import repeat
from operator import add, attrgetter
from typing import Any, Iterator, Sequence

from k8py.scheduler.cache.aggregate import Contribution, NodeAggregate
from k8py.scheduler.framework.interfaces import MAX_NODE_SCORE, ClusterEventHint, CycleState, PreFilterResult
from k8py.scheduler.framework.node_table import WINDOW_KEY, Window
from k8py.scheduler.framework.status import Code, Status, unresolvable, unschedulable
from k8py.scheduler.framework.types import NodeInfo, PodInfo
from k8py.scheduler.plugins.names import POD_TOPOLOGY_SPREAD
from k8py.scheduler.plugins.spread_constraints import (DEFAULT_CONSTRAINTS, HOSTNAME, REASON_CONSTRAINTS, REASON_MISSING_LABEL,
                                                       Constraint, SpreadState, check_node, constraints_of,
                                                       count_matching, eligible, kept_count, node_contribution,
                                                       score_for_count, spread_state, state_from)

__all__ = ["PodTopologySpread"]

_FILTER_KEY = "PreFilter" + POD_TOPOLOGY_SPREAD
_SCORE_KEY = "PreScore" + POD_TOPOLOGY_SPREAD
_LABELS = attrgetter("labels")


def _label_values(nodes: Sequence[NodeInfo], key: str) -> Iterator[str | None]:
    """Each node's value of label ``key`` (None if it has none), read in C."""
    return map(dict.get, map(_LABELS, nodes), repeat(key))


def _window_of(state: CycleState, nodes: list[NodeInfo]) -> Window | None:
    """The window of the cache's node list that ``nodes`` were taken from, if the cycle took them so."""
    found = state.data.get(WINDOW_KEY)
    return found[0] if found is not None and found[1] is nodes else None


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
        #: (the soft constraints' shape, all keys required) -> their counts by domain (PreScore)
        self._score_domains: OrderedDict[Any, NodeAggregate] = OrderedDict()

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

    @staticmethod
    def _kept(table: OrderedDict[Any, NodeAggregate], key: Any, contribution: Contribution, cache: Any,
              row_group: str | None = None) -> NodeAggregate:
        """``table``'s aggregate for ``key`` (made with ``contribution`` when new; the 16 used
        last are kept), brought up to date from the cache's changes."""
        agg = table.get(key)
        if agg is None:
            agg = table[key] = NodeAggregate(contribution, row_group=row_group)
            if len(table) > 16:
                table.popitem(last=False)
        else:
            table.move_to_end(key)
        agg.refresh(cache)
        return agg

    def _kept_host_counts(self, c: Constraint) -> tuple[dict[str, int], list[int] | None] | None:
        """How many of each node's pods ``c`` counts, kept up to date from the cache's changes
        (by node name, and by position in the cache's node list); None without a cache."""
        cache = getattr(self.handle, "cache", None)
        if cache is None or c.count_key is None:
            return None
        namespace, selector = c.count_key[0], c.selector

        def on_node(node: NodeInfo) -> list[tuple[str, str, int]]:
            n = count_matching(node, selector, namespace)
            return [("host", node.name, n)] if n else []

        agg = self._kept(self._host_counts, c.count_key, on_node, cache, row_group="host")
        # the row serves a window of the cache's node list only when every listed node has a hostname
        row = agg.row if cache.label_key_node_count(HOSTNAME) == len(cache.nodes) else None
        return agg.groups.get("host") or {}, row

    def _kept_domain_counts(self, pod: PodInfo, soft: list[Constraint], required: Sequence[Constraint],
                            cache: Any) -> dict[Any, dict[str, int]]:
        """For each of ``soft`` but the hostname's (by its index there), the pods it counts in each
        domain of its key over the eligible nodes, kept up to date from the cache's changes: the
        pass over every node that a zone's counts need, paid for the nodes that changed (at 5,000
        zoned nodes it had held a Deployment's pods to 206 a second)."""
        namespace = pod.namespace
        keyed = [(i, c) for i, c in enumerate(soft) if c.key != HOSTNAME]

        def on_node(node: NodeInfo) -> list[tuple[int, str, int]]:
            out = []
            if node.pods:
                for i, c in keyed:
                    value = node.labels.get(c.key)
                    if value is not None and eligible(pod, node, required, c):
                        n = kept_count(node, c, namespace)
                        if n:
                            out.append((i, value, n))
            return out

        return self._kept(self._score_domains, (self._shape(pod, soft), bool(required)), on_node, cache).groups

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> tuple[PreFilterResult | None, Status | None]:
        hard = [c for c in constraints_of(pod, self.defaults) if c.hard]
        if not hard:
            return None, Status(Code.SKIP)
        cache = getattr(self.handle, "cache", None)
        if cache is None:
            state.write(_FILTER_KEY, spread_state(pod, nodes, hard))
            return None, None
        groups = self._kept(self._aggregates, self._shape(pod, hard), lambda node: node_contribution(pod, node, hard), cache).groups
        state.write(_FILTER_KEY, state_from(pod, hard, groups))
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
        full, origin = soft, list(range(len(soft)))  # (``soft`` trimmed below; ``origin``: each one's index in ``full``)
        # the domains among the feasible nodes scored, for the keys other than the hostname
        # (each node is its own hostname domain: the hostname's weight is from ``scored``)
        cache = getattr(self.handle, "cache", None)
        domains: list[set[str]] = [
            set() if c.key == HOSTNAME or (cache is not None and not cache.label_key_node_count(c.key))
            else set(_label_values(nodes, c.key)) - {None} for c in soft]  # type: ignore[misc]
        if not require_all and not all(domains[i] for i, c in enumerate(soft) if c.key != HOSTNAME):
            # a key no feasible node has scores no node: left out (a zone, on zone-less nodes)
            kept = [i for i, c in enumerate(soft) if c.key == HOSTNAME or domains[i]]  # (the defaults' hostname stays)
            soft, domains, origin = [soft[i] for i in kept], [domains[i] for i in kept], [origin[i] for i in kept]
        # the hostname's counts by node name (None: counted per node when scored) and by node
        # position (``rows``); the other keys' by domain
        hosts = [self._kept_host_counts(c) if c.key == HOSTNAME else None for c in soft]
        counts: list[dict[str, int] | None] = [(h[0] if h is not None else None) if c.key == HOSTNAME else defaultdict(int)
                                               for c, h in zip(soft, hosts)]
        rows = [h[1] if h is not None else None for h in hosts]
        # only constraints with a domain among the feasible nodes need the pass over every
        # node (none when no node has a zone: 5,000 nodes a pod for nothing)
        counted = [i for i, c in enumerate(soft) if c.key != HOSTNAME and domains[i]]
        if counted and cache is not None:  # (a cache comes with a handle)
            sums = self._kept_domain_counts(pod, full, soft if require_all else (), cache)
            for i in counted:
                counts[i] = {value: n for value, n in (sums.get(origin[i]) or {}).items() if value in domains[i]}
        elif counted:
            required = soft if require_all else ()
            for node in self._all_nodes(nodes):
                if not node.pods:
                    continue
                for i in counted:
                    c = soft[i]
                    value = node.labels.get(c.key)
                    if value is not None and value in domains[i] and eligible(pod, node, required, c):
                        counts[i][value] += kept_count(node, c, pod.namespace)  # type: ignore[index]
        weights = [math.log((scored if c.key == HOSTNAME else len(domains[i])) + 2) for i, c in enumerate(soft)]
        state.write(_SCORE_KEY, (soft, counts, weights, require_all, rows))
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        soft, counts, weights, require_all, _ = state.read(_SCORE_KEY)
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
                count = kept_count(node, c, pod.namespace)
            else:
                count = kept.get(node.name if c.key == HOSTNAME else value, 0)
            total += score_for_count(count, c.max_skew, weights[i])
        return round(total)

    def score_nodes(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> list[int]:
        """The batch form of :meth:`score` (the same sums in the same order): per
        constraint, one pass over the nodes for their counts (for the hostname, when
        the nodes are a window of the cache's node list, slices of its row of counts);
        with one constraint, each count's score is computed once."""
        soft, counts, weights, require_all, rows = state.read(_SCORE_KEY)
        namespace = pod.namespace
        found_by: list[list[int | None]] = []
        for i, c in enumerate(soft):
            key, kept = c.key, counts[i]
            if kept is None:
                found = [kept_count(n, c, namespace) if key in n.labels else None for n in nodes]
            elif key == HOSTNAME:
                window = _window_of(state, nodes) if rows[i] is not None else None
                if window is not None:
                    found = window.take(rows[i])  # (every listed node has a hostname)
                else:
                    found = [kept.get(n.name, 0) if key in n.labels else None for n in nodes]
            else:  # each node's domain's count (None: no domain), looked up in C
                lookup: dict[str | None, int | None] = {**kept, None: None}
                found = list(map(lookup.get, _label_values(nodes, key), repeat(0)))
            found_by.append(found)
        if len(soft) == 1:
            max_skew, weight = soft[0].max_skew, weights[0]
            by_count = {n: 0 if n is None else round(score_for_count(n, max_skew, weight)) for n in set(found_by[0])}
            scores = list(map(by_count.__getitem__, found_by[0]))
        else:
            totals: list[float] = [0.0] * len(nodes)
            for i, found in enumerate(found_by):
                max_skew, weight = soft[i].max_skew, weights[i]
                # each distinct count's score once (a constraint that does not score a node adds 0.0:
                # the same sum), the nodes' sums in C
                by_count = {n: 0.0 if n is None else score_for_count(n, max_skew, weight) for n in set(found)}
                totals = list(map(add, totals, map(by_count.__getitem__, found)))
            scores = list(map(round, totals))
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
        # each distinct score mapped once (a few counts among hundreds of nodes), the nodes in C
        if hi == 0:
            normalized = {s: 0 if s < 0 else MAX_NODE_SCORE for s in set(scores)}
        else:
            top = MAX_NODE_SCORE * (hi + lo)
            normalized = {s: 0 if s < 0 else (top - MAX_NODE_SCORE * s) // hi for s in set(scores)}
        scores[:] = map(normalized.__getitem__, scores)

    def events_to_register(self) -> list[ClusterEventHint]:
        return [ClusterEventHint("AssignedPod", frozenset({"Add", "UpdatePodLabel", "Delete"})),
                ClusterEventHint("Node", frozenset({"Add", "UpdateNodeLabel", "UpdateNodeTaint", "Delete"}))]
