"""Rate limiters: backoff sequences, token bucket, max-of, and the rate-limited queue."""

from __future__ import annotations

import pytest

from k8py.client.clock import FakeClock, settle
from k8py.client.rate_limiters import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    default_controller_rate_limiter,
)
from k8py.client.rate_limiting_queue import RateLimitingQueue


@pytest.mark.parametrize(
    ("base", "cap", "expected"),
    [
        (0.005, 1000.0, [0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32]),
        (1.0, 5.0, [1.0, 2.0, 4.0, 5.0, 5.0]),
        (0.001, 0.001, [0.001, 0.001]),
    ],
)
def test_exponential_backoff_sequence(base: float, cap: float, expected: list[float]) -> None:
    limiter = ItemExponentialFailureRateLimiter(base, cap)
    assert [limiter.when("x") for _ in expected] == pytest.approx(expected)
    assert limiter.num_requeues("x") == len(expected)


def test_exponential_backoff_is_per_item_and_forget_resets() -> None:
    limiter = ItemExponentialFailureRateLimiter(0.005, 1000.0)
    limiter.when("a")
    limiter.when("a")
    assert limiter.when("b") == pytest.approx(0.005)
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == pytest.approx(0.005)


def test_exponential_backoff_reaches_and_stays_at_the_cap() -> None:
    limiter = ItemExponentialFailureRateLimiter(0.005, 1000.0)
    delays = [limiter.when("x") for _ in range(2000)]
    assert delays[17] == pytest.approx(0.005 * 2**17)  # 655.36 s, still under the cap
    assert delays[18:] == [1000.0] * (2000 - 18)


def test_token_bucket_allows_a_burst_then_spaces_requests_at_qps() -> None:
    clock = FakeClock()
    limiter = BucketRateLimiter(10.0, 100, clock=clock)
    assert [limiter.when(i) for i in range(100)] == [0.0] * 100
    assert [limiter.when(i) for i in range(3)] == pytest.approx([0.1, 0.2, 0.3])
    clock.advance(1.0)  # 10 tokens refilled; debt was 3
    assert limiter.when("x") == 0.0
    assert limiter.num_requeues("x") == 0


def test_token_bucket_refill_is_capped_at_burst() -> None:
    clock = FakeClock()
    limiter = BucketRateLimiter(1.0, 2, clock=clock)
    clock.advance(3600)
    assert [limiter.when(i) for i in range(3)] == pytest.approx([0.0, 0.0, 1.0])


def test_max_of_takes_the_slowest_answer() -> None:
    clock = FakeClock()
    limiter = MaxOfRateLimiter(ItemExponentialFailureRateLimiter(1.0, 100.0), BucketRateLimiter(1.0, 1, clock=clock))
    assert limiter.when("a") == pytest.approx(1.0)  # exp 1 s, bucket 0 s
    assert limiter.when("a") == pytest.approx(2.0)  # exp 2 s, bucket 1 s
    assert limiter.num_requeues("a") == 2
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0


def test_default_controller_rate_limiter_starts_at_5ms() -> None:
    limiter = default_controller_rate_limiter(clock=FakeClock())
    assert [limiter.when("k") for _ in range(3)] == pytest.approx([0.005, 0.01, 0.02])


@pytest.mark.parametrize("args", [(0, 1.0), (2.0, 1.0)])
def test_exponential_rejects_bad_bounds(args: tuple[float, float]) -> None:
    with pytest.raises(ValueError):
        ItemExponentialFailureRateLimiter(*args)


async def test_rate_limited_queue_backs_off_then_forget_resets() -> None:
    clock = FakeClock()
    queue: RateLimitingQueue[str] = RateLimitingQueue(
        rate_limiter=ItemExponentialFailureRateLimiter(1.0, 60.0), clock=clock
    )
    ready_after: list[float] = []
    for _ in range(3):
        start = clock.monotonic()
        queue.add_rate_limited("k")
        await settle()
        while len(queue) == 0:
            await clock.step(0.25)
        ready_after.append(clock.monotonic() - start)
        queue.done(await queue.get())
    assert ready_after == [1.0, 2.0, 4.0]
    assert queue.num_requeues("k") == 3
    queue.forget("k")
    assert queue.num_requeues("k") == 0
    queue.shut_down()
