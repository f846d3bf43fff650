"""Injectable time for everything in :mod:`k8py.client`.

Queues, rate limiters and controller loops never call :func:`time.monotonic`
or :func:`asyncio.sleep` directly: they take a :class:`Clock`. Production code
passes :class:`RealClock`; tests pass :class:`FakeClock` and move time by hand,
so no test ever sleeps for real and every timing assertion is exact.

Two readings, as in Go's ``time`` package:

- ``now()`` is wall time (an aware UTC :class:`~datetime.datetime`), for
  timestamps that end up in objects (conditions, events);
- ``monotonic()`` is seconds on a clock that never jumps, for every duration
  (delays, backoff, metrics).

:class:`FakeClock` keeps both in step: advancing it moves the wall time and the
monotonic reading by the same amount.

Invariants of :class:`FakeClock`:

- time moves only through :meth:`FakeClock.advance` / :meth:`FakeClock.step`
  (or :meth:`FakeClock.set_monotonic`), never backwards;
- a sleeper wakes exactly when the clock reaches its deadline, and sleepers
  whose deadlines are reached by one advance are woken in deadline order (ties
  in the order they went to sleep);
- a cancelled sleeper is forgotten and never counted by :meth:`FakeClock.sleepers`.

Both clocks belong to one event loop: :meth:`FakeClock.advance` must be called
from the loop that the sleepers run on.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "RealClock", "FakeClock", "settle"]


@runtime_checkable
class Clock(Protocol):
    """The time source every client component takes."""

    def now(self) -> datetime:
        """Wall-clock time, timezone-aware UTC."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards (origin unspecified)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Suspend the calling task for ``seconds`` of this clock's time."""
        ...


class RealClock:
    """The system clock and :func:`asyncio.sleep`."""

    __slots__ = ()

    def now(self) -> datetime:
        return datetime.now(timezone.utc)

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


@dataclass(order=True, slots=True)
class _Sleeper:
    deadline: float
    seq: int
    future: asyncio.Future[None] = field(compare=False)


_EPOCH = datetime(2025, 1, 1, tzinfo=timezone.utc)


class FakeClock:
    """A clock that moves only when a test says so.

    ``advance(s)`` is synchronous, like the Go fake clock's ``Step``: it moves
    time and wakes every due sleeper, and the woken tasks run when the caller
    next yields to the loop. ``await step(s)`` walks the same window deadline
    by deadline, yielding to the loop at each one, so that a task woken at
    ``t`` which sleeps again for ``d`` is woken again at ``t + d`` within the
    same call (a retry loop with backoff, for example).
    """

    def __init__(self, *, start: datetime = _EPOCH, monotonic_start: float = 1000.0) -> None:
        if start.tzinfo is None:
            raise ValueError("start must be timezone-aware")
        self._wall_origin = start
        self._mono_origin = monotonic_start
        self._mono = monotonic_start
        self._sleepers: list[_Sleeper] = []
        self._seq = itertools.count()

    # -- readings ---------------------------------------------------------------

    def now(self) -> datetime:
        return self._wall_origin + timedelta(seconds=self._mono - self._mono_origin)

    def monotonic(self) -> float:
        return self._mono

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, _Sleeper(self._mono + seconds, next(self._seq), future))
        await future  # cancellation leaves a done future that _wake skips

    # -- control ----------------------------------------------------------------

    def sleepers(self) -> int:
        """How many tasks are asleep on this clock right now."""
        return sum(1 for s in self._sleepers if not s.future.done())

    def next_deadline(self) -> float | None:
        """The monotonic reading at which the next sleeper wakes, if any."""
        self._drop_cancelled()
        return self._sleepers[0].deadline if self._sleepers else None

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds`` and wake every sleeper now due."""
        if seconds < 0:
            raise ValueError("a clock cannot go backwards")
        self._mono += seconds
        self._wake_due()

    def set_monotonic(self, reading: float) -> None:
        """Move time forward to an absolute monotonic reading."""
        self.advance(reading - self._mono)

    async def step(self, seconds: float, *, settle_rounds: int = 20) -> None:
        """Advance by ``seconds`` one deadline at a time, letting woken tasks run.

        At each deadline inside the window the clock stops, wakes its sleepers
        and yields to the loop ``settle_rounds`` times so that they can act (and
        go back to sleep) before time moves on.
        """
        if seconds < 0:
            raise ValueError("a clock cannot go backwards")
        target = self._mono + seconds
        while True:
            deadline = self.next_deadline()
            if deadline is None or deadline > target:
                break
            self._mono = max(self._mono, deadline)
            self._wake_due()
            await settle(settle_rounds)
        self._mono = target
        await settle(settle_rounds)

    def _drop_cancelled(self) -> None:
        while self._sleepers and self._sleepers[0].future.done():
            heapq.heappop(self._sleepers)

    def _wake_due(self) -> None:
        while self._sleepers and self._sleepers[0].deadline <= self._mono:
            sleeper = heapq.heappop(self._sleepers)
            if not sleeper.future.done():
                sleeper.future.set_result(None)


async def settle(rounds: int = 20) -> None:
    """Yield to the event loop ``rounds`` times so ready tasks can run."""
    for _ in range(rounds):
        await asyncio.sleep(0)
