"""Watches of the SQLite store: history replay from the log, then live events.

One process owns the database, so there is nothing to poll: the writer hands
every committed batch to :meth:`WatchHub.publish` on the event loop, and the
hub appends the matching events to each subscriber's queue.

A watch ``after=R`` runs in three steps (:func:`watch_stream`):

1. subscribe, and note ``upto`` = the newest revision published so far — in
   the same loop step, so every revision above ``upto`` reaches the queue;
2. replay rows with ``R < revision <= upto`` from the log (they are all
   committed, since publication follows the COMMIT), in bounded chunks, then
   send a progress notification at ``upto``;
3. go live: deliver queued events with a revision above the last one
   delivered. Replay and queue meet at ``upto`` with no gap, and the revision
   cursor drops anything the queue holds twice.

Invariants and limits:

- events are delivered in revision order, each once;
- a batch's ``revision`` means "every event under the prefix up to here has
  been delivered"; when a watch is idle for ``progress_interval`` seconds it
  sends an empty batch (a progress notification) at the newest revision, and
  at once after :meth:`WatchHub.request_progress`;
- each subscriber's queue is bounded: a watcher more than ``queue_limit``
  events behind (a slow consumer, or a long replay under heavy writes) is
  dropped and its iterator raises :class:`WatchLaggedError`, carrying the last
  revision it delivered so the caller can watch again from there. Memory never
  grows without bound;
- replay re-checks the compacted revision after every chunk: if compaction
  overtook the cursor, the watch raises CompactedError instead of skipping;
- when the store closes, queued events are still delivered and the iterator
  then ends.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import AsyncIterator, Awaitable, Callable, Sequence

from k8py.storage.interface import (
    CompactedError,
    StorageUnavailableError,
    WatchBatch,
    WatchEvent,
    WatchLaggedError,
)

__all__ = ["WatchHub", "WatchLaggedError", "watch_stream", "Replay"]

# (prefix, after, upto, limit) -> events with after < revision <= upto, oldest first
Replay = Callable[[str, int, int, int], Awaitable[list[WatchEvent]]]


class _Subscription:
    __slots__ = ("prefix", "pending", "revision", "wakeup", "lagged", "closed", "progress")

    def __init__(self, prefix: str, revision: int) -> None:
        self.prefix = prefix
        self.pending: deque[WatchEvent] = deque()
        self.revision = revision  # newest revision offered to this subscriber
        self.wakeup = asyncio.Event()
        self.lagged = False
        self.closed = False
        self.progress = False  # a progress notification was asked for


class WatchHub:
    """Fans committed events out to subscribers. Loop thread only."""

    def __init__(self, *, revision: int, queue_limit: int) -> None:
        self.revision = revision  # newest published (= committed and acknowledged) revision
        self.queue_limit = queue_limit
        self._subs: set[_Subscription] = set()
        self._closed = False

    @property
    def watchers(self) -> int:
        return len(self._subs)

    def subscribe(self, prefix: str) -> _Subscription:
        if self._closed:
            raise StorageUnavailableError("the store is closed")
        sub = _Subscription(prefix, self.revision)
        self._subs.add(sub)
        return sub

    def unsubscribe(self, sub: _Subscription) -> None:
        self._subs.discard(sub)

    def publish(self, events: Sequence[WatchEvent], revision: int) -> None:
        self.revision = revision
        dropped = []
        for sub in self._subs:
            sub.revision = revision
            matching = [e for e in events if e.kv.key.startswith(sub.prefix)]
            if not matching:
                continue
            if len(sub.pending) + len(matching) > self.queue_limit:
                sub.lagged = True
                sub.pending.clear()
                dropped.append(sub)
            else:
                sub.pending.extend(matching)
            sub.wakeup.set()
        for sub in dropped:
            self._subs.discard(sub)

    def request_progress(self) -> None:
        """Every subscriber delivers a progress notification at the newest
        published revision on its next step."""
        for sub in self._subs:
            sub.progress = True
            sub.wakeup.set()

    def close(self) -> None:
        self._closed = True
        for sub in self._subs:
            sub.closed = True
            sub.wakeup.set()
        self._subs.clear()


async def watch_stream(
    hub: WatchHub,
    prefix: str,
    *,
    after: int,
    replay: Replay,
    compacted: Callable[[], int],
    progress_interval: float,
    replay_chunk: int = 1000,
) -> AsyncIterator[WatchBatch]:
    """The body of ``Storage.watch`` (see the module docstring)."""
    floor = compacted()
    if after + 1 < floor:
        raise CompactedError(after, floor)
    sub = hub.subscribe(prefix)
    try:
        upto = hub.revision
        cursor = after
        while cursor < upto:
            events = await replay(prefix, cursor, upto, replay_chunk)
            floor = compacted()
            if cursor + 1 < floor:
                raise CompactedError(cursor, floor)
            if not events:
                break
            cursor = events[-1].revision
            yield WatchBatch(revision=cursor, events=tuple(events))
            if len(events) < replay_chunk:
                break
        cursor = max(after, upto)
        yield WatchBatch(revision=cursor)

        while True:
            idle = False
            if not (sub.pending or sub.lagged or sub.closed or sub.progress):
                sub.wakeup.clear()
                try:
                    async with asyncio.timeout(progress_interval):
                        await sub.wakeup.wait()
                except TimeoutError:
                    idle = True
            if sub.lagged:
                raise WatchLaggedError(cursor, hub.queue_limit)
            live = tuple(e for e in sub.pending if e.revision > cursor)
            sub.pending.clear()
            progress, sub.progress = sub.progress, False
            cursor = max(cursor, sub.revision)
            if live:
                yield WatchBatch(revision=cursor, events=live)
            elif sub.closed:
                return
            elif idle or progress:
                yield WatchBatch(revision=cursor)
    finally:
        hub.unsubscribe(sub)
