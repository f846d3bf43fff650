"""How long to wait before retrying an item (client-go ``default_rate_limiters``).

A :class:`RateLimiter` answers three questions about an item: how long to wait
before its next retry (``when``, which also records the failure), how often it
has been retried (``num_requeues``), and ``forget`` (it succeeded; start over).

- :class:`ItemExponentialFailureRateLimiter`: per item, ``base * 2**failures``
  capped at ``max_delay``. Forgetting resets the item.
- :class:`BucketRateLimiter`: one token bucket shared by all items (overall
  retry rate), ``qps`` tokens a second up to ``burst``. Like Go's
  ``rate.Limiter.Reserve``, a request always succeeds and is told how long to
  wait for its token; the bucket may go into debt.
- :class:`MaxOfRateLimiter`: the longest wait of several limiters.

:func:`default_controller_rate_limiter` is client-go's
``DefaultControllerRateLimiter``: the max of a 5 ms .. 1000 s per-item
exponential backoff and a 10 qps / burst 100 bucket.

Limiters are used from one event loop and keep no locks.
"""

from __future__ import annotations

from typing import Hashable, Protocol

from k8py.client.clock import Clock, RealClock

__all__ = [
    "RateLimiter",
    "ItemExponentialFailureRateLimiter",
    "BucketRateLimiter",
    "MaxOfRateLimiter",
    "default_controller_rate_limiter",
]


class RateLimiter(Protocol):
    def when(self, item: Hashable) -> float:
        """Seconds to wait before retrying ``item``; records one more failure."""
        ...

    def forget(self, item: Hashable) -> None:
        """Stop tracking ``item`` (it succeeded or was given up)."""
        ...

    def num_requeues(self, item: Hashable) -> int:
        """How many times ``item`` has been through :meth:`when` since last forgotten."""
        ...


class ItemExponentialFailureRateLimiter:
    """``base_delay * 2**failures(item)``, at most ``max_delay`` seconds."""

    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        if base_delay <= 0 or max_delay < base_delay:
            raise ValueError("need 0 < base_delay <= max_delay")
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._failures: dict[Hashable, int] = {}
        # 2**exp beyond this exceeds max_delay anyway; avoids huge float math.
        self._max_exp = 0
        while base_delay * 2**self._max_exp < max_delay:
            self._max_exp += 1

    def when(self, item: Hashable) -> float:
        exp = self._failures.get(item, 0)
        self._failures[item] = exp + 1
        if exp >= self._max_exp:
            return self.max_delay
        return min(self.base_delay * float(2**exp), self.max_delay)

    def forget(self, item: Hashable) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: Hashable) -> int:
        return self._failures.get(item, 0)


class BucketRateLimiter:
    """A token bucket over all items: ``qps`` tokens a second, at most ``burst``."""

    def __init__(self, qps: float = 10.0, burst: int = 100, *, clock: Clock | None = None) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError("need qps > 0 and burst >= 1")
        self.qps = qps
        self.burst = burst
        self._clock: Clock = clock if clock is not None else RealClock()
        self._tokens = float(burst)
        self._last = self._clock.monotonic()

    def when(self, item: Hashable) -> float:
        now = self._clock.monotonic()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def forget(self, item: Hashable) -> None:
        pass

    def num_requeues(self, item: Hashable) -> int:
        return 0


class MaxOfRateLimiter:
    """Waits as long as the slowest of ``limiters`` says; counts as the highest."""

    def __init__(self, *limiters: RateLimiter) -> None:
        if not limiters:
            raise ValueError("need at least one rate limiter")
        self.limiters = limiters

    def when(self, item: Hashable) -> float:
        return max(limiter.when(item) for limiter in self.limiters)

    def forget(self, item: Hashable) -> None:
        for limiter in self.limiters:
            limiter.forget(item)

    def num_requeues(self, item: Hashable) -> int:
        return max(limiter.num_requeues(item) for limiter in self.limiters)


def default_controller_rate_limiter(*, clock: Clock | None = None) -> MaxOfRateLimiter:
    """Per-item 5 ms .. 1000 s exponential backoff, overall 10 qps with burst 100."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(0.005, 1000.0),
        BucketRateLimiter(10.0, 100, clock=clock),
    )
