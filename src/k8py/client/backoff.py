"""Exponential backoff with jitter, on an injectable clock and random source.

Used by the REST client between retries and by the reflector between failed
list/watch attempts (client-go's ``wait.Backoff`` and reflector
``backoffManager``: 800 ms doubling to 30 s, full jitter, reset after two
quiet minutes).

The n-th delay (n from 0) is ``min(cap, initial * factor**n)``, then
stretched by jitter: ``d + d * jitter * random()`` (client-go's
``wait.Jitter``), and capped again. ``reset_after``: if no failure was
recorded for that many clock seconds, the next delay starts from
``initial`` again, so a component that failed once an hour does not wait as
if it had failed 30 times in a row.
"""

from __future__ import annotations

import random
from typing import Callable

from k8py.client.clock import Clock, RealClock

__all__ = ["Backoff"]


class Backoff:
    """Delays between attempts; not shared between unrelated loops."""

    def __init__(
        self,
        *,
        initial: float = 0.8,
        cap: float = 30.0,
        factor: float = 2.0,
        jitter: float = 1.0,
        reset_after: float | None = 120.0,
        clock: Clock | None = None,
        rng: Callable[[], float] = random.random,
    ) -> None:
        if initial <= 0 or cap < initial or factor < 1 or jitter < 0:
            raise ValueError("invalid backoff parameters")
        self.initial = initial
        self.cap = cap
        self.factor = factor
        self.jitter = jitter
        self.reset_after = reset_after
        self._clock: Clock = clock if clock is not None else RealClock()
        self._rng = rng
        self._failures = 0
        self._last_failure: float | None = None

    @property
    def failures(self) -> int:
        return self._failures

    def reset(self) -> None:
        self._failures = 0
        self._last_failure = None

    def next_delay(self) -> float:
        """Record one more failure and return how long to wait before the next try."""
        now = self._clock.monotonic()
        if self.reset_after is not None and self._last_failure is not None and now - self._last_failure >= self.reset_after:
            self._failures = 0
        base = min(self.cap, self.initial * self.factor ** min(self._failures, 64))
        self._failures += 1
        self._last_failure = now
        return min(self.cap, base + base * self.jitter * self._rng())

    async def wait(self) -> float:
        """Sleep for :meth:`next_delay` on the clock; returns the delay slept."""
        delay = self.next_delay()
        await self._clock.sleep(delay)
        return delay
