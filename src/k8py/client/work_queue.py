"""The de-duplicating work queue at the bottom of every controller (client-go's
``workqueue.Type``).

Controllers queue *keys*, not objects: many changes to one object between two
syncs collapse into one unit of work, and the worker reads the latest state
from the cache. Guarantees:

- an item is queued at most once: ``add`` of an item already waiting is a
  no-op;
- an item is processed by at most one worker at a time: an item added while
  it is being processed is not handed out again until ``done`` is called for
  it, and then it is re-queued once (``dirty`` remembers it);
- items are handed out in the order they were (first) queued;
- after ``shut_down`` new adds are ignored; ``get`` still hands out what is
  queued, and raises :class:`QueueShutDown` once the queue is empty;
- ``shut_down_with_drain`` additionally waits until no item is being
  processed (every ``get`` has had its ``done``). Like client-go, it does not
  wait for items that no worker has taken; it returns at once if nothing is
  in flight. Calling ``shut_down`` meanwhile stops the wait.

Invariant: every item in ``_queue`` is in ``_dirty`` and not in
``_processing``.

The queue is unbounded by design: it holds at most one entry per distinct key,
so it is bounded by the number of objects in the cache that feeds it.

Concurrency: the queue belongs to one event loop and is not thread-safe; from
another thread use ``loop.call_soon_threadsafe(queue.add, item)``.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Generic, Hashable, TypeVar

from k8py.client.clock import Clock, RealClock
from k8py.client.metrics import MetricsProvider, QueueMetrics, default_metrics_provider

__all__ = ["QueueShutDown", "WorkQueue"]

T = TypeVar("T", bound=Hashable)


class QueueShutDown(Exception):
    """Raised by ``get`` on a shut-down, empty queue: the worker should exit."""


class WorkQueue(Generic[T]):
    """See the module docstring. ``name`` labels the metrics (empty: none)."""

    def __init__(
        self,
        *,
        name: str = "",
        clock: Clock | None = None,
        metrics_provider: MetricsProvider | None = None,
    ) -> None:
        self.name = name
        self._clock: Clock = clock if clock is not None else RealClock()
        self._metrics = QueueMetrics(
            name, metrics_provider if metrics_provider is not None else default_metrics_provider(), self._clock
        )
        self._queue: deque[T] = deque()
        self._dirty: set[T] = set()
        self._processing: set[T] = set()
        self._shutting_down = False
        self._drain = False
        self._item_available = asyncio.Event()
        self._item_done = asyncio.Event()

    # -- producer -----------------------------------------------------------------

    def add(self, item: T) -> None:
        """Mark ``item`` as needing processing (see the guarantees above)."""
        if self._shutting_down or item in self._dirty:
            return
        self._metrics.add(item)
        self._dirty.add(item)
        if item in self._processing:
            return  # re-queued by done()
        self._queue.append(item)
        self._item_available.set()

    # -- consumer -----------------------------------------------------------------

    async def get(self) -> T:
        """Wait for an item and mark it as being processed.

        The caller must call :meth:`done` with it when finished. Raises
        :class:`QueueShutDown` when the queue is shut down and empty.
        """
        while not self._queue and not self._shutting_down:
            self._item_available.clear()
            await self._item_available.wait()
        if not self._queue:
            raise QueueShutDown(self.name)
        item = self._queue.popleft()
        self._metrics.get(item)
        self._processing.add(item)
        self._dirty.discard(item)
        return item

    def done(self, item: T) -> None:
        """Finish processing ``item``; re-queue it if it was added meanwhile."""
        self._metrics.done(item)
        self._processing.discard(item)
        if item in self._dirty:
            self._queue.append(item)
            self._item_available.set()
        if not self._processing:
            self._item_done.set()

    # -- lifecycle ----------------------------------------------------------------

    def shut_down(self) -> None:
        """Ignore new adds and let workers exit once the queue is empty."""
        self._drain = False
        self._shut_down()
        self._item_done.set()  # release a pending shut_down_with_drain

    async def shut_down_with_drain(self) -> None:
        """Like :meth:`shut_down`, then wait until no item is being processed."""
        self._drain = True
        self._shut_down()
        while self._processing and self._drain:
            self._item_done.clear()
            await self._item_done.wait()

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def _shut_down(self) -> None:
        self._shutting_down = True
        self._item_available.set()

    # -- introspection ------------------------------------------------------------

    def __len__(self) -> int:
        """Items waiting to be handed out (informational only)."""
        return len(self._queue)

    def is_dirty(self, item: T) -> bool:
        """Whether ``item`` is waiting to be processed (queued or re-queued)."""
        return item in self._dirty

    def is_processing(self, item: T) -> bool:
        return item in self._processing

    @property
    def records_metrics(self) -> bool:
        """Whether this queue feeds a metrics provider (it has a name and one)."""
        return self._metrics.enabled

    def update_unfinished_work_metrics(self) -> None:
        """Sample the unfinished-work gauges; call periodically (see metrics)."""
        self._metrics.update_unfinished_work()
