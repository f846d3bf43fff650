"""ControllerLoop: forget on success, rate-limited retries, give-up, shutdown."""

from __future__ import annotations

import asyncio

import pytest

from k8py.client.clock import FakeClock, settle
from k8py.client.controller_loop import ControllerLoop, wait_for_cache_sync
from k8py.client.rate_limiters import ItemExponentialFailureRateLimiter
from k8py.client.rate_limiting_queue import RateLimitingQueue


class Recorder:
    """A sync function that fails the first ``failures`` calls for each key."""

    def __init__(self, clock: FakeClock, failures: int = 0, result: float | None = None) -> None:
        self.clock = clock
        self.failures = failures
        self.result = result
        self.calls: list[tuple[str, float]] = []
        self.start = clock.monotonic()

    async def __call__(self, key: str) -> float | None:
        self.calls.append((key, round(self.clock.monotonic() - self.start, 6)))
        if sum(1 for k, _ in self.calls if k == key) <= self.failures:
            raise RuntimeError(f"sync {key} failed")
        return self.result


def make_loop(
    recorder: Recorder, *, max_retries: int | None = 3, workers: int = 1, gave_up: list | None = None
) -> ControllerLoop[str]:
    queue: RateLimitingQueue[str] = RateLimitingQueue(
        rate_limiter=ItemExponentialFailureRateLimiter(0.005, 1000.0), clock=recorder.clock
    )

    async def on_give_up(key: str, error: Exception) -> None:
        if gave_up is not None:
            gave_up.append((key, str(error)))

    return ControllerLoop(
        name="test",
        queue=queue,
        sync=recorder,
        workers=workers,
        max_retries=max_retries,
        on_give_up=on_give_up,
        clock=recorder.clock,
    )


# (failures before success, max_retries, expected call times, gives up)
RETRY_CASES = [
    pytest.param(0, 3, [0.0], False, id="success-first-time"),
    pytest.param(2, 3, [0.0, 0.005, 0.015], False, id="succeeds-on-third-try"),
    pytest.param(99, 3, [0.0, 0.005, 0.015, 0.035], True, id="gives-up-after-max-retries"),
    pytest.param(99, 0, [0.0], True, id="zero-retries-gives-up-at-once"),
]


@pytest.mark.parametrize(("failures", "max_retries", "times", "gives_up"), RETRY_CASES)
async def test_retries_with_backoff_then_gives_up(
    failures: int, max_retries: int, times: list[float], gives_up: bool
) -> None:
    clock = FakeClock()
    recorder = Recorder(clock, failures=failures)
    gave_up: list[tuple[str, str]] = []
    loop = make_loop(recorder, max_retries=max_retries, gave_up=gave_up)
    runner = asyncio.create_task(loop.run())
    loop.queue.add("ns/a")
    await settle()
    await clock.step(10.0, settle_rounds=10)
    assert recorder.calls == [("ns/a", t) for t in times]
    assert gave_up == ([("ns/a", "sync ns/a failed")] if gives_up else [])
    assert loop.queue.num_requeues("ns/a") == 0, "forgotten after success or give-up"
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner


async def test_a_new_change_after_give_up_is_synced_again() -> None:
    clock = FakeClock()
    recorder = Recorder(clock, failures=1)
    gave_up: list[tuple[str, str]] = []
    loop = make_loop(recorder, max_retries=0, gave_up=gave_up)
    runner = asyncio.create_task(loop.run())
    loop.queue.add("k")
    await settle()
    assert len(gave_up) == 1
    loop.queue.add("k")
    await settle()
    assert [k for k, _ in recorder.calls] == ["k", "k"]
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner


async def test_returned_delay_requeues_without_counting_a_failure() -> None:
    clock = FakeClock()
    recorder = Recorder(clock, result=30.0)
    loop = make_loop(recorder)
    runner = asyncio.create_task(loop.run())
    loop.queue.add("k")
    await settle()
    await clock.step(61.0, settle_rounds=10)
    assert [t for _, t in recorder.calls] == [0.0, 30.0, 60.0]
    assert loop.queue.num_requeues("k") == 0
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner


async def test_workers_never_sync_one_key_concurrently() -> None:
    clock = FakeClock()
    active: set[str] = set()
    overlaps: list[str] = []
    done: list[str] = []

    async def slow_sync(key: str) -> None:
        if key in active:
            overlaps.append(key)
        active.add(key)
        await clock.sleep(1)
        active.discard(key)
        done.append(key)

    queue: RateLimitingQueue[str] = RateLimitingQueue(clock=clock)
    loop = ControllerLoop(name="c", queue=queue, sync=slow_sync, workers=4, clock=clock)
    runner = asyncio.create_task(loop.run())
    for key in ("a", "b", "a", "c"):
        queue.add(key)
    await settle()
    queue.add("a")  # while a is being synced
    await clock.step(5, settle_rounds=10)
    assert overlaps == []
    assert sorted(done) == ["a", "a", "b", "c"]
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner


async def test_run_returns_after_drained_shutdown() -> None:
    clock = FakeClock()
    finished: list[str] = []

    async def sync(key: str) -> None:
        await clock.sleep(1)
        finished.append(key)

    queue: RateLimitingQueue[str] = RateLimitingQueue(clock=clock)
    loop = ControllerLoop(name="c", queue=queue, sync=sync, workers=2, clock=clock)
    runner = asyncio.create_task(loop.run())
    queue.add("a")
    queue.add("b")
    await settle()
    drainer = asyncio.create_task(queue.shut_down_with_drain())
    await settle()
    assert not drainer.done()
    await clock.step(1)
    await asyncio.wait_for(drainer, 1)
    await asyncio.wait_for(runner, 1)
    assert sorted(finished) == ["a", "b"]


async def test_cancelling_run_cancels_workers_and_shuts_the_queue() -> None:
    clock = FakeClock()
    cancelled: list[str] = []

    async def sync(key: str) -> None:
        try:
            await clock.sleep(100)
        except asyncio.CancelledError:
            cancelled.append(key)
            raise

    queue: RateLimitingQueue[str] = RateLimitingQueue(clock=clock)
    loop = ControllerLoop(name="c", queue=queue, sync=sync, clock=clock)
    runner = asyncio.create_task(loop.run())
    queue.add("a")
    await settle()
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner
    assert cancelled == ["a"]
    assert queue.shutting_down


async def test_a_failing_give_up_hook_does_not_kill_the_worker() -> None:
    clock = FakeClock()
    recorder = Recorder(clock, failures=1)

    def bad_hook(key: str, error: Exception) -> None:
        raise ValueError("hook broke")

    queue: RateLimitingQueue[str] = RateLimitingQueue(clock=clock)
    loop = ControllerLoop(name="c", queue=queue, sync=recorder, max_retries=0, on_give_up=bad_hook, clock=clock)
    runner = asyncio.create_task(loop.run())
    queue.add("a")
    queue.add("b")
    await settle()
    assert [k for k, _ in recorder.calls] == ["a", "b"]
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner


async def test_wait_for_cache_sync_polls_until_all_synced() -> None:
    clock = FakeClock()
    state = {"a": False, "b": True}
    waiter = asyncio.create_task(wait_for_cache_sync(lambda: state["a"], lambda: state["b"], clock=clock))
    await clock.step(1)
    assert not waiter.done()
    state["a"] = True
    await clock.step(0.1)
    assert await asyncio.wait_for(waiter, 1) is True


async def test_wait_for_cache_sync_times_out() -> None:
    clock = FakeClock()
    waiter = asyncio.create_task(wait_for_cache_sync(lambda: False, clock=clock, timeout=2))
    await settle()
    await clock.step(1.9)
    assert not waiter.done()
    await clock.step(0.2)
    assert await asyncio.wait_for(waiter, 1) is False
