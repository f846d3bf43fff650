"""The clock watch streams keep time by: bookmarks, ``timeoutSeconds``, slow-client deadlines.

Injectable so tests say "one bookmark interval later" instead of sleeping
and measuring wall-clock windows. :class:`LoopClock` (the default) is the
event loop's monotonic clock; :class:`ManualClock` moves only when told
(:meth:`ManualClock.advance`, called on the loop that runs the watches) and
then fires every timer that has come due, in time order.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from typing import Callable, Protocol

__all__ = ["WatchClock", "Timer", "LoopClock", "ManualClock"]


class Timer(Protocol):
    def cancel(self) -> None: ...


class WatchClock(Protocol):
    def now(self) -> float:
        """Seconds on a monotonic scale."""

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        """Run ``callback`` (on the running loop) once ``now() >= when``."""


class LoopClock:
    """The running event loop's clock."""

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        return asyncio.get_running_loop().call_at(when, callback)


class _ManualTimer:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A clock for tests: time passes only through :meth:`advance`."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._timers: list[tuple[float, int, _ManualTimer, Callable[[], None]]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._now

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        timer = _ManualTimer()
        heapq.heappush(self._timers, (when, next(self._seq), timer, callback))
        return timer

    def advance(self, seconds: float) -> None:
        """Move time forward and fire the timers now due (call on the watches' loop)."""
        self._now += seconds
        while self._timers and self._timers[0][0] <= self._now:
            _, _, timer, callback = heapq.heappop(self._timers)
            if not timer.cancelled:
                callback()
