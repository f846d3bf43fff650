"""A work queue that can add an item later (client-go's ``DelayingInterface``).

``add_after(item, delay)`` parks the item until ``clock.monotonic()`` reaches
its ready time, then ``add``\\ s it (so the usual de-duplication applies).
Guarantees:

- an item parked twice keeps the *earlier* ready time (a later request never
  postpones it);
- ``delay <= 0`` adds at once;
- every ``add_after`` counts as a retry in the metrics, as in client-go;
- after shut-down, ``add_after`` is ignored and parked items are dropped.

One background task per queue (named ``delaying-queue:<name>``) sleeps on the
injected clock until the earliest ready time, and is woken early when an
earlier item arrives. It starts with the first ``add_after`` that needs it
(hence ``add_after`` must be called from inside the running loop) and is
cancelled by shut-down.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools

from k8py.client.clock import Clock
from k8py.client.metrics import MetricsProvider
from k8py.client.work_queue import T, WorkQueue

__all__ = ["DelayingQueue"]

class DelayingQueue(WorkQueue[T]):
    """A :class:`~k8py.client.work_queue.WorkQueue` with :meth:`add_after`."""

    def __init__(
        self,
        *,
        name: str = "",
        clock: Clock | None = None,
        metrics_provider: MetricsProvider | None = None,
    ) -> None:
        super().__init__(name=name, clock=clock, metrics_provider=metrics_provider)
        self._ready_at: dict[T, float] = {}
        self._heap: list[tuple[float, int, T]] = []  # may hold stale entries
        self._seq = itertools.count()
        self._wakeup: asyncio.Future[None] | None = None
        self._loop_task: asyncio.Task[None] | None = None

    def add_after(self, item: T, delay: float) -> None:
        """Add ``item`` once ``delay`` seconds of the queue's clock have passed."""
        if self.shutting_down:
            return
        self._metrics.retry()
        if delay <= 0:
            self.add(item)
            return
        ready_at = self._clock.monotonic() + delay
        current = self._ready_at.get(item)
        if current is not None and current <= ready_at:
            return
        self._ready_at[item] = ready_at
        seq = next(self._seq)
        heapq.heappush(self._heap, (ready_at, seq, item))
        if self._heap[0][1] == seq:
            self._wake()  # a new earliest deadline: re-arm the timer
        if self._loop_task is None:
            self._loop_task = asyncio.get_running_loop().create_task(
                self._waiting_loop(), name=f"delaying-queue:{self.name or id(self)}"
            )

    def waiting(self) -> int:
        """How many items are parked (informational only)."""
        return len(self._ready_at)

    def shut_down(self) -> None:
        super().shut_down()
        self._stop_waiting_loop()

    async def shut_down_with_drain(self) -> None:
        self._stop_waiting_loop()
        await super().shut_down_with_drain()

    def _stop_waiting_loop(self) -> None:
        self._ready_at.clear()
        self._heap.clear()
        if self._loop_task is not None:
            self._loop_task.cancel()
            self._loop_task = None

    def _wake(self) -> None:
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    def _add_ready(self) -> float | None:
        """Add every item that is due; return the next ready time, if any."""
        now = self._clock.monotonic()
        while self._heap:
            ready_at, _, item = self._heap[0]
            if self._ready_at.get(item) != ready_at:
                heapq.heappop(self._heap)  # superseded by an earlier request
                continue
            if ready_at > now:
                return ready_at
            heapq.heappop(self._heap)
            del self._ready_at[item]
            self.add(item)
        return None

    async def _waiting_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while not self.shutting_down:
            self._wakeup = loop.create_future()
            next_ready = self._add_ready()
            if next_ready is None:
                await self._wakeup
                continue
            sleeper = loop.create_task(
                self._clock.sleep(next_ready - self._clock.monotonic()),
                name=f"delaying-queue-sleep:{self.name or id(self)}",
            )
            try:
                await asyncio.wait({sleeper, self._wakeup}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                sleeper.cancel()
