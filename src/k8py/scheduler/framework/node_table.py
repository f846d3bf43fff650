"""Node-local results of every listed node, per pod shape, kept in step with
the cache: the cycle reads its window of nodes with C-speed slices.

``node_local`` makes a node's local filter + score result one lookup while the
node is unchanged; a cycle still visits each node of its window (500 of
5,000 by default) three or four times in Python — filter, scores, totals,
best. Between two cycles of pods of one shape, though, only the nodes a pod
landed on or left have changed. So a :class:`LocalTable` keeps, for one
(profile, pod shape), in the cache's node order:

- ``ok``: a bytearray, 1 where every local filter passes;
- per scoring signature (which local scorers, with which weights) the
  summed raw scores, 0 where a filter fails;

and brings them up to date from the cache's change log (``changed_since``),
recomputing only the nodes changed since its last cycle (through the same
memo entries, so the results are those of the per-node path). A cycle then
finds its window — from the rotating start index, the shortest run holding
``want`` feasible nodes — by counting bytes, and takes its feasible nodes and
their scores by slicing (``itertools.compress`` where some failed).

When it applies (the caller checks): every active Filter is node-local, no
nominated pods, no PreFilterResult narrowing the nodes, and a change log to
read. Anything else takes the per-node path, as does a window with no
feasible node (its diagnosis needs every node's status).

Invariants: a table's ``entries[i]`` is the memo entry of ``nodes[i]`` as of
``generation``; a change of the node list's layout (a node added or removed:
indices shift) rebuilds the table; so does a change log longer than an
eighth of the nodes (cheaper than walking it).
"""

from __future__ import annotations

from itertools import compress
from typing import Any, Protocol, Sequence

from k8py.scheduler.framework.interfaces import CycleState
from k8py.scheduler.framework.node_local import LocalPlan
from k8py.scheduler.framework.types import NodeInfo, PodInfo

__all__ = ["NodeChanges", "LocalTable", "LocalTables", "Window", "WINDOW_KEY"]

#: CycleState key of (window, the feasible list taken from it)
WINDOW_KEY = "framework/local-window"

#: one scoring signature: (index of the local scorer in the plan, weight) pairs
Signature = tuple[tuple[int, int], ...]


class NodeChanges(Protocol):
    """What a table reads of the cache (``SchedulerCache`` is one)."""

    @property
    def generation(self) -> int: ...

    #: bumped whenever a node enters or leaves the list (positions move)
    layout: int

    def changed_since(self, generation: int) -> list[NodeInfo]: ...


class Window:
    """One cycle's nodes: up to two slices of the node list (it wraps), and
    whether every node in them is feasible (then no mask is needed)."""

    __slots__ = ("ranges", "table", "all_ok", "processed")

    def __init__(self, table: LocalTable, ranges: list[tuple[int, int]], all_ok: bool, processed: int) -> None:
        self.table = table
        self.ranges = ranges
        self.all_ok = all_ok
        self.processed = processed

    def take(self, values: Sequence[Any]) -> list[Any]:
        """``values`` (one per listed node) of this window's feasible nodes, in order."""
        out: list[Any] = []
        ok = self.table.ok
        for lo, hi in self.ranges:
            if self.all_ok:
                out += values[lo:hi]
            else:
                out += compress(values[lo:hi], ok[lo:hi])
        return out

    def scores(self, signature: Signature) -> list[int]:
        """The summed weighted raw scores of ``signature`` on the feasible nodes."""
        return self.take(self.table.derived(signature))


def _total(entry: tuple[int, Any, tuple[int, ...]], signature: Signature) -> int:
    if entry[1] is not None:
        return 0
    scores = entry[2]
    return sum(scores[i] * w for i, w in signature)


class LocalTable:
    """See the module docstring."""

    __slots__ = ("generation", "layout", "entries", "ok", "feasible", "_derived")

    def __init__(self) -> None:
        self.generation = -1
        self.layout = -1
        self.entries: list[tuple[int, Any, tuple[int, ...]]] = []
        self.ok = bytearray()
        self.feasible = 0
        self._derived: dict[Signature, list[int]] = {}

    def sync(self, plan: LocalPlan, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo], changes: NodeChanges) -> None:
        generation = changes.generation
        if self.layout == changes.layout and len(self.entries) == len(nodes):
            if generation == self.generation:
                return
            changed = changes.changed_since(self.generation)
            if len(changed) <= len(nodes) // 8 + 1:
                for info in changed:
                    i = info.index
                    if 0 <= i < len(nodes) and nodes[i] is info:
                        self._set(i, plan.entry(state, pod, info))
                self.generation = generation
                return
        self.entries = [plan.entry(state, pod, n) for n in nodes]
        self.ok = bytearray(1 if e[1] is None else 0 for e in self.entries)
        self.feasible = self.ok.count(1)
        self._derived.clear()
        self.layout = changes.layout
        self.generation = generation

    def _set(self, i: int, entry: tuple[int, Any, tuple[int, ...]]) -> None:
        self.entries[i] = entry
        ok = 1 if entry[1] is None else 0
        self.feasible += ok - self.ok[i]
        self.ok[i] = ok
        for signature, values in self._derived.items():
            values[i] = _total(entry, signature)

    def derived(self, signature: Signature) -> list[int]:
        values = self._derived.get(signature)
        if values is None:
            values = self._derived[signature] = [_total(e, signature) for e in self.entries]
        return values

    def window(self, start: int, want: int) -> Window | None:
        """The shortest run from ``start`` (wrapping) holding ``want`` feasible
        nodes, or every node if fewer are feasible; None if none is."""
        n = len(self.entries)
        if self.feasible == 0 or n == 0:
            return None
        if self.feasible < want:  # every node is looked at
            ranges = [(start, n), (0, start)] if start else [(0, n)]
            return Window(self, ranges, self.feasible == n, n)
        if self.feasible == n:
            end = start + want
            ranges = [(start, end)] if end <= n else [(start, n), (0, end - n)]
            return Window(self, ranges, True, want)
        ok = self.ok
        first = ok.count(1, start)
        if first >= want:
            end = _kth_end(ok, start, n, want)
            return Window(self, [(start, end)], False, end - start)
        end = _kth_end(ok, 0, start, want - first)
        return Window(self, [(start, n), (0, end)], False, n - start + end)


def _kth_end(ok: bytearray, lo: int, hi: int, k: int) -> int:
    """The smallest ``end`` in (lo, hi] with ``k`` ones in ``ok[lo:end]`` (there are at least k)."""
    a, b = lo + k, hi  # ok[lo:a] has at most k ones; ok[lo:b] at least k
    while a < b:
        mid = (a + b) // 2
        if ok.count(1, lo, mid) >= k:
            b = mid
        else:
            a = mid + 1
    return a


class LocalTables:
    """The tables of one scheduler, by (profile, plan key); a few shapes at a time."""

    MAX_TABLES = 16

    def __init__(self) -> None:
        self._tables: dict[tuple[str, int], LocalTable] = {}

    def get(self, profile: str, key: int) -> LocalTable:
        table = self._tables.get((profile, key))
        if table is None:
            if len(self._tables) >= self.MAX_TABLES:
                self._tables.clear()
            table = self._tables[(profile, key)] = LocalTable()
        return table
