"""FakeClock: time moves only by hand, and sleepers wake in deadline order."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import pytest

from k8py.client.clock import Clock, FakeClock, RealClock, settle


async def test_advance_wakes_due_sleepers_in_deadline_order() -> None:
    clock = FakeClock()
    woke: list[str] = []

    async def sleeper(label: str, seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append(label)

    tasks = [asyncio.create_task(sleeper(label, s)) for label, s in [("c", 3), ("a", 1), ("b", 2), ("late", 10)]]
    await settle()
    assert clock.sleepers() == 4

    clock.advance(0.5)
    await settle()
    assert woke == []

    clock.advance(2.5)  # now at +3: a, b, c are due
    await settle()
    assert woke == ["a", "b", "c"]
    assert clock.sleepers() == 1
    clock.advance(7)
    await asyncio.gather(*tasks)
    assert woke == ["a", "b", "c", "late"]


async def test_equal_deadlines_wake_in_the_order_they_slept() -> None:
    clock = FakeClock()
    woke: list[int] = []

    async def sleeper(i: int) -> None:
        await clock.sleep(1)
        woke.append(i)

    tasks = [asyncio.create_task(sleeper(i)) for i in range(5)]
    await settle()
    clock.advance(1)
    await asyncio.gather(*tasks)
    assert woke == [0, 1, 2, 3, 4]


async def test_cancelled_sleeper_is_forgotten() -> None:
    clock = FakeClock()
    task = asyncio.create_task(clock.sleep(5))
    await settle()
    assert clock.sleepers() == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert clock.sleepers() == 0
    assert clock.next_deadline() is None
    clock.advance(10)  # must not trip over the cancelled future


async def test_step_lets_a_woken_task_sleep_again_within_the_window() -> None:
    clock = FakeClock()
    start = clock.monotonic()
    ticks: list[float] = []

    async def ticker() -> None:
        for _ in range(4):
            await clock.sleep(1)
            ticks.append(clock.monotonic() - start)

    task = asyncio.create_task(ticker())
    await settle()
    await clock.step(3.5)
    assert ticks == [1, 2, 3]
    assert clock.monotonic() - start == 3.5
    await clock.step(1)
    await task
    assert ticks == [1, 2, 3, 4]


async def test_wall_time_moves_with_monotonic_time() -> None:
    start = datetime(2030, 5, 1, tzinfo=timezone.utc)
    clock = FakeClock(start=start)
    clock.advance(90)
    assert clock.now() == start + timedelta(seconds=90)


@pytest.mark.parametrize("bad", [lambda c: c.advance(-1), lambda c: FakeClock(start=datetime(2030, 1, 1))])
def test_fake_clock_rejects_going_backwards_and_naive_start(bad) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError):
        bad(FakeClock())


async def test_zero_sleep_returns_without_advancing() -> None:
    clock = FakeClock()
    await asyncio.wait_for(clock.sleep(0), timeout=1)
    assert clock.sleepers() == 0


async def test_both_clocks_satisfy_the_protocol() -> None:
    assert isinstance(RealClock(), Clock)
    assert isinstance(FakeClock(), Clock)
    real = RealClock()
    before = real.monotonic()
    await real.sleep(0)
    assert real.monotonic() >= before
    assert real.now().tzinfo is not None
