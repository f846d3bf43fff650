"""Node-local plugin results, remembered per node between cycles.

Most Filter and Score plugins (resource fit, taints, node affinity, node
name, ports, balanced allocation) read nothing but the node and a few fields
of the pod. Such a plugin says so by implementing ``local_key(pod)``: a
hashable digest of the pod fields it reads. For pods with the same digests,
its result on a node cannot change until the node does — and a node changes
(its ``generation`` is bumped) only when a pod lands on it, leaves it, or the
Node object changes. So the framework computes, per node and per pod shape,
one entry::

    (generation, first failing local filter's Status or None, raw local scores)

and reuses it while the generation holds. With 5,000 nodes and one new pod
per cycle, all but one node of each cycle hit the memo: the per-node cost of
the whole local filter + score pipeline becomes one dict lookup.

The entry used last also sits in two slots of the NodeInfo (``memo_key``,
``memo_entry``), so the filter pass and then the score pass over the same
nodes read attributes instead of hashing.

Invariants: a ``local_key`` plugin's ``filter``/``score`` must not read the
CycleState or any other node; non-local plugins (InterPodAffinity,
PodTopologySpread, ImageLocality) run normally after the local ones; a memo
holds at most ``MAX_SHAPES`` pod shapes per node.
"""

from __future__ import annotations

from typing import Any, Sequence

from k8py.scheduler.framework.interfaces import CycleState
from k8py.scheduler.framework.status import Status
from k8py.scheduler.framework.types import NodeInfo, PodInfo

__all__ = ["LocalPlan", "plan_for", "shape_id", "MAX_SHAPES"]

MAX_SHAPES = 8
_STATE_KEY = "framework/local-plan"
# A shape's full key is a nested tuple whose hash Python recomputes on every
# lookup; each distinct key gets a small int once per cycle instead. Ids are
# never reused (the counter only grows), so clearing the table is safe.
_IDS: dict[Any, int] = {}
_NEXT_ID = [0]


def shape_id(key: Any) -> int:
    found = _IDS.get(key)
    if found is None:
        if len(_IDS) >= 10_000:
            _IDS.clear()
        _NEXT_ID[0] += 1
        found = _IDS[key] = _NEXT_ID[0]
    return found


class LocalPlan:
    """The local filters and scorers of one cycle and the memo key of its pod."""

    __slots__ = ("filters", "others", "scorers", "key")

    def __init__(self, filters: list[Any], others: list[Any], scorers: list[Any], pod: PodInfo) -> None:
        self.filters = filters
        self.others = others
        self.scorers = scorers
        self.key = shape_id((tuple(p.name for p in filters), tuple(p.name for p in scorers),
                             tuple(p.local_key(pod) for p in filters), tuple(p.local_key(pod) for p in scorers)))

    def entry(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status | None, tuple[int, ...]]:
        if node.memo_key == self.key and node.memo_entry[0] == node.generation:
            return node.memo_entry  # type: ignore[no-any-return]
        memo = node.memo
        e = memo.get(self.key)
        if e is None or e[0] != node.generation:
            status: Status | None = None
            for plugin in self.filters:
                s = plugin.filter(state, pod, node)
                if s is not None and not s.is_success():
                    status = s.with_plugin(plugin.name)
                    break
            scores = () if status is not None else tuple(p.score(state, pod, node) for p in self.scorers)
            e = (node.generation, status, scores)
            if len(memo) >= MAX_SHAPES:
                memo.clear()
            memo[self.key] = e
        node.memo_key = self.key
        node.memo_entry = e
        return e

    def scores(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> list[tuple[int, ...]]:
        """The raw local scores of ``nodes``: the entries the filter pass just used."""
        key = self.key
        out = []
        append = out.append
        for node in nodes:
            e = node.memo_entry
            if node.memo_key != key or e[0] != node.generation or e[1] is not None:
                e = self.entry(state, pod, node)
            append(e[2])
        return out

    def filter(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo], failed: dict[str, Status]) -> list[NodeInfo]:
        key = self.key
        passed = []
        append = passed.append
        for node in nodes:
            e = node.memo_entry
            if node.memo_key != key or e[0] != node.generation:
                e = self.entry(state, pod, node)
            if e[1] is None:
                append(node)
            else:
                failed[node.name] = e[1]
        return passed


def plan_for(state: CycleState, pod: PodInfo, filters: list[Any], scorers: list[Any]) -> LocalPlan:
    """This cycle's plan (made once, kept in the CycleState)."""
    plan = state.data.get(_STATE_KEY)
    if plan is None:
        local = [p for p in filters if hasattr(p, "local_key")]
        others = [p for p in filters if not hasattr(p, "local_key")]
        plan = LocalPlan(local, others, [p for p in scorers if hasattr(p, "local_key")], pod)
        state.data[_STATE_KEY] = plan
    return plan  # type: ignore[no-any-return]
