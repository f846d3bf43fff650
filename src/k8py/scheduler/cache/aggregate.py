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
"""

from __future__ import annotations

from typing import Any, Callable, Hashable, Iterable

from k8py.scheduler.framework.types import NodeInfo

__all__ = ["NodeAggregate", "Contribution"]

Contribution = Callable[[NodeInfo], Iterable[tuple[Hashable, str, int]]]


class NodeAggregate:
    def __init__(self, contribution: Contribution) -> None:
        self.contribution = contribution
        self.groups: dict[Hashable, dict[str, int]] = {}
        self._parts: dict[str, list[tuple[Hashable, str, int]]] = {}
        self.generation: int | None = None

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
        return self.groups
