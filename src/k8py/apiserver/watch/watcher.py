"""One watch connection's view of its resource's events.

The watch cache calls :meth:`Watcher.offer` for each event that might concern
the watcher (it only visits watchers indexed under the event's namespace or
indexed-field value). ``offer`` applies the watcher's selectors to the new
*and* the previous state of the object, so transitions come out right:

=================  ==================  =========================================
previous matched   new matches         the watcher receives
=================  ==================  =========================================
no                 yes                 ADDED
yes                yes                 MODIFIED
yes                no                  DELETED (previous state, this event's RV)
no                 no                  nothing
=================  ==================  =========================================

Events are queued as ``(type, encoded object)``. Once the stream is live,
``offer`` returns True when it queued something, the watch cache hands the
watchers that did back to the cacher, and the cacher flushes each once after
the store batch (the watcher knows neither of them): everything
queued goes out in one write straight to the connection, with no task switch
per watcher per event. While the initial events are still being written, or
when the connection's buffer is backed up, the stream's own task writes them
instead (and waits for the buffer to drain). The queue is bounded
(``max_pending``): a watcher that falls that far behind is terminated, and
its client re-watches from the last resourceVersion it saw, as with upstream's
slow-watcher handling. ``offer`` never awaits.
"""

from __future__ import annotations

import asyncio
from typing import Callable, Protocol

from k8py.apiserver.watch.watch_cache import ADDED, DELETED, MODIFIED, CacheEvent, CachedObject

__all__ = ["Selection", "Sink", "Watcher"]


class Selection(Protocol):
    """Which objects a watch is for (upstream's SelectionPredicate);
    :class:`k8py.apiserver.handlers.query.Query` is one."""

    @property
    def namespace(self) -> str:
        """The namespace selected ("" = every namespace, or cluster-scoped)."""

    @property
    def index_value(self) -> str | None:
        """The value the selection pins the resource's indexed field to."""

    def matches(self, obj: CachedObject) -> bool:
        """True if ``obj`` is selected."""


#: writes queued events to the stream now; False when it cannot (a slow client)
Sink = Callable[[list[tuple[str, bytes]]], bool]


class Watcher:
    __slots__ = (
        "query", "namespace", "index_value", "pending", "wake", "terminated", "overflowed",
        "max_pending", "min_rv", "sink",
    )

    def __init__(self, query: Selection, *, max_pending: int = 20_000) -> None:
        self.query = query
        self.namespace = query.namespace
        self.index_value = query.index_value
        self.pending: list[tuple[str, bytes]] = []
        self.wake = asyncio.Event()
        self.terminated = False
        self.overflowed = False
        self.max_pending = max_pending
        #: events at or below this revision are not for this watcher (a watch
        #: that started from a resourceVersion the cache had not reached)
        self.min_rv = 0
        #: set by the stream once its initial events are out: from then on the
        #: cacher writes each batch's events straight to the connection
        self.sink: Sink | None = None

    def offer(self, event: CacheEvent) -> bool:
        """Queue what ``event`` means to this watcher; True if the queue now
        wants a :meth:`flush` after the batch (the stream is live)."""
        if self.terminated or event.rv <= self.min_rv:
            return False
        q = self.query
        if event.type == ADDED:
            if q.matches(event.obj):
                return self._push(ADDED, event.obj.data)
        elif event.type == MODIFIED:
            now_matches = q.matches(event.obj)
            before = event.prev is not None and q.matches(event.prev)
            if now_matches and before:
                return self._push(MODIFIED, event.obj.data)
            elif now_matches:
                return self._push(ADDED, event.obj.data)
            elif before:
                return self._push(DELETED, event.prev_data_at_rv())
        elif event.type == DELETED:
            if q.matches(event.obj):
                return self._push(DELETED, event.obj.data)
        return False

    def _push(self, type_: str, data: bytes) -> bool:
        self.pending.append((type_, data))
        if len(self.pending) > self.max_pending:
            self.overflowed = True
            self.terminate()
            return False
        if self.sink is not None:
            return True
        self.wake.set()
        return False

    def flush(self) -> None:
        """Write the queued events straight to the stream (the cacher calls
        this once per store batch), or hand them to the stream's task when
        the connection is backed up."""
        if not self.pending or self.terminated or self.sink is None:
            return
        if self.sink(self.pending):
            self.pending = []
        else:
            self.wake.set()

    def take(self) -> list[tuple[str, bytes]]:
        out, self.pending = self.pending, []
        self.wake.clear()
        return out

    def terminate(self) -> None:
        self.terminated = True
        self.wake.set()
