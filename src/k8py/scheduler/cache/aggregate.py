"""Cluster-wide sums over nodes, kept up to date incrementally.

Some plugins need, every cycle, a sum over *all* nodes (how many pods matching
a selector are in each zone; which topology domains hold a pod whose
anti-affinity rejects this one). Recomputing that per cycle is O(nodes +
pods). A :class:`NodeAggregate` keeps each node's contribution and the sums,
and on :meth:`refresh` recomputes only the nodes the cache changed since the
last refresh (``SchedulerCache.changed_since``: the generation clock), so a
cycle pays for the one or two nodes that changed.

A contribution is a list of ``(group, value, n)``; the sums are
``groups[group][value]``. Entries that sum to 0 are dropped, so ``groups``
holds only live values. The contribution function must depend only on the
node (its labels, pods) and on what the aggregate's owner fixed when making
it (the incoming pod's shape).

With ``row_group``, :meth:`refresh` also keeps :attr:`row`: that group's sum
for each listed node, at the node's position in the cache's node list (0 for
none). The group's values must be node names (PodTopologySpread's count by
hostname). The scorer then reads a cycle's window of it with slices, in C,
instead of looking every scored node up by name: at 5,000 nodes those 500
lookups a cycle, each a few cache misses through a NodeInfo, its name and a
dict, were a fifth of the scheduler's CPU while 10,000 pods were scheduled.
"""

from __future__ import annotations

from typing import Any, Callable, Hashable, Iterable

from k8py.scheduler.framework.types import NodeInfo

__all__ = ["NodeAggregate", "Contribution"]

Contribution = Callable[[NodeInfo], Iterable[tuple[Hashable, str, int]]]


class NodeAggregate:
    def __init__(self, contribution: Contribution, *, row_group: Hashable | None = None) -> None:
        self.contribution = contribution
        self.groups: dict[Hashable, dict[str, int]] = {}
        self._parts: dict[str, list[tuple[Hashable, str, int]]] = {}
        self.generation: int | None = None
        self.row_group = row_group
        #: ``row_group``'s sum by node position (see the module docstring); valid for ``_layout``
        self.row: list[int] = []
        self._layout: int | None = None

    def _apply(self, part: Iterable[tuple[Hashable, str, int]], sign: int) -> None:
        groups = self.groups
        for group, value, n in part:
            values = groups.get(group)
            if values is None:
                values = groups[group] = {}
            total = values.get(value, 0) + sign * n
            if total:
                values[value] = total
            else:
                values.pop(value, None)
                if not values:
                    del groups[group]

    def refresh(self, cache: Any) -> dict[Hashable, dict[str, int]]:
        if self.generation is None:
            changed = cache.all_infos()
        else:
            changed = cache.changed_since(self.generation)
        self.generation = cache.generation
        for info in changed:
            old = self._parts.pop(info.name, None)
            if old:
                self._apply(old, -1)
            new = list(self.contribution(info)) if (info.node is not None or info.pods) else []
            if new:
                self._parts[info.name] = new
                self._apply(new, +1)
        if self.row_group is not None:
            self._refresh_row(cache, changed)
        return self.groups

    def _refresh_row(self, cache: Any, changed: list[NodeInfo]) -> None:
        values = self.groups.get(self.row_group) or {}
        nodes = cache.nodes
        if self._layout != cache.layout or len(self.row) != len(nodes):  # positions moved: all of it again
            self.row = [values.get(n.name, 0) for n in nodes]
            self._layout = cache.layout
            return
        row = self.row
        for info in changed:
            if info.index >= 0:
                row[info.index] = values.get(info.name, 0)
