"""Watchers with one selection, fanned out to as one.

A hundred informers of one namespace, or every client of "all pods", select
alike: what an event means to one of them it means to all. The watch cache
therefore indexes a :class:`WatcherGroup` per distinct selection (and index
place) instead of each watcher, so an event costs one decision per group,
not one per watcher. The group queues the decisions of the batches applied
since the last flush (``items``, shared by every member); its
:meth:`WatcherGroup.flush` hands them to each member once
(:meth:`~k8py.apiserver.watch.watcher.Watcher.deliver`), where the one
per-watcher cost left is the write of a frame the members share (encoded
once, see ``handlers.watch_stream``).

Invariants:

- a member receives exactly the items of events after it joined: a watcher
  joining while items are queued has its ``min_rv`` raised to the cache's
  revision (:meth:`WatcherGroup.join`), and ``deliver`` skips items at or
  below it; its initial events or replay already cover those;
- items are in event order, and a member's older queued events (a backlog)
  go out before them (``deliver`` appends behind ``pending``);
- a member is not :attr:`~k8py.apiserver.watch.watcher.Watcher.caught_up`
  while the group holds items: its stream writes no bookmark that could
  overtake them;
- a decision that raises fails the whole group: it would raise for every
  member alike (their selections are equal).

Watchers whose selection is unknown (no ``selection_key``) are not grouped:
the cache offers them each event alone, as before.
"""

from __future__ import annotations

import logging
from typing import Any

from k8py.apiserver.watch.cached_object import CacheEvent
from k8py.apiserver.watch.watcher import SelectionToken, Watcher, decide

__all__ = ["WatcherGroup"]

log = logging.getLogger(__name__)


class WatcherGroup:
    """Live watchers with equal selections, indexed at one place of the cache
    (a :class:`~k8py.apiserver.watch.watch_cache.CacheWatcher` to it)."""

    __slots__ = ("selection", "query", "namespace", "index_value", "name_value", "members", "items", "rvs", "nbytes")

    def __init__(self, first: Watcher) -> None:
        self.selection: SelectionToken = first.selection
        self.query = first.query
        self.namespace = first.namespace
        self.index_value = first.index_value
        self.name_value = first.name_value
        #: insertion-ordered, so members are flushed in the order they joined
        self.members: dict[Watcher, None] = {}
        #: decisions queued since the last flush, their events' RVs, their bytes
        self.items: list[tuple[str, bytes]] = []
        self.rvs: list[int] = []
        self.nbytes = 0

    def join(self, watcher: Watcher, revision: int) -> None:
        """Add ``watcher``, whose start covers everything up to ``revision``."""
        if self.items and watcher.min_rv < revision:
            watcher.min_rv = revision  # the queued items are older than its start
        self.members[watcher] = None
        watcher.group = self

    def leave(self, watcher: Watcher) -> None:
        self.members.pop(watcher, None)
        watcher.group = None

    def offer(self, event: CacheEvent, decisions: dict[Any, Any] | None = None) -> bool:
        """Decide once for every member; True when something was queued."""
        if not self.members:
            return False
        decision = decide(self.query, event)
        if decision is None:
            return False
        self.items.append(decision)
        self.rvs.append(event.rv)
        self.nbytes += len(decision[1])
        return True

    def flush(self, frames: dict[Any, bytes] | None = None) -> None:
        """Hand the queued items to every member (each writes, or queues
        behind its backlog); ``frames`` is the flush's shared encodings."""
        items, rvs, nbytes = self.items, self.rvs, self.nbytes
        if not items:
            return
        self.items, self.rvs, self.nbytes = [], [], 0
        for watcher in list(self.members):
            watcher.deliver(items, rvs, nbytes, frames)

    def terminate(self) -> None:
        for watcher in list(self.members):
            watcher.terminate()

    def fail(self, reason: str) -> None:
        for watcher in list(self.members):
            watcher.fail(reason)

    def __len__(self) -> int:
        return len(self.members)
