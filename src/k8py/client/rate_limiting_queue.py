"""A delaying queue that asks a rate limiter how long to wait (client-go's
``RateLimitingInterface``).

The controller loop's retry policy lives here and in
:mod:`k8py.client.rate_limiters`, never in ``sync`` functions:
``add_rate_limited`` on failure, ``forget`` on success (or when giving up),
``num_requeues`` to decide when to give up. ``forget`` only resets the
limiter's memory of the item; it does not remove the item from the queue.
"""

from __future__ import annotations

from k8py.client.clock import Clock
from k8py.client.delaying_queue import DelayingQueue
from k8py.client.metrics import MetricsProvider
from k8py.client.rate_limiters import RateLimiter, default_controller_rate_limiter
from k8py.client.work_queue import T

__all__ = ["RateLimitingQueue"]


class RateLimitingQueue(DelayingQueue[T]):
    """``rate_limiter`` defaults to :func:`default_controller_rate_limiter` on
    the queue's clock."""

    def __init__(
        self,
        *,
        rate_limiter: RateLimiter | None = None,
        name: str = "",
        clock: Clock | None = None,
        metrics_provider: MetricsProvider | None = None,
    ) -> None:
        super().__init__(name=name, clock=clock, metrics_provider=metrics_provider)
        self.rate_limiter: RateLimiter = (
            rate_limiter if rate_limiter is not None else default_controller_rate_limiter(clock=self._clock)
        )

    def add_rate_limited(self, item: T) -> None:
        """Add ``item`` after the delay the rate limiter gives it."""
        self.add_after(item, self.rate_limiter.when(item))

    def forget(self, item: T) -> None:
        """The item succeeded: reset its backoff (it stays queued if it is)."""
        self.rate_limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        return self.rate_limiter.num_requeues(item)
