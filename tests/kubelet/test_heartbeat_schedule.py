"""The shared heartbeat schedule of the simulated nodes: beats spread over their period, and kept there.

A fake clock drives the schedule; the actions record when they ran.
"""

from __future__ import annotations

import asyncio
import random

import pytest

from k8py.client.clock import FakeClock, settle
from k8py.kubelet.heartbeat_schedule import HeartbeatSchedule


async def _running(schedule: HeartbeatSchedule) -> asyncio.Task[None]:
    task = asyncio.create_task(schedule.run(), name="test-heartbeats")
    await settle()
    return task


async def _stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_beats_are_spread_over_their_period_and_each_runs_once_a_period() -> None:
    clock = FakeClock()
    schedule = HeartbeatSchedule(clock=clock, rng=random.Random(7))
    runs: dict[int, list[float]] = {i: [] for i in range(200)}

    def action(i: int):  # type: ignore[no-untyped-def]
        async def run() -> None:
            runs[i].append(clock.monotonic())
        return run

    for i in range(200):
        schedule.add(f"b{i}", 10.0, action(i))
    task = await _running(schedule)
    try:
        await clock.step(10.0, settle_rounds=200)
        per_second = [0] * 10
        for times in runs.values():
            assert len(times) == 1
            per_second[min(9, int(times[0] - 1000.0))] += 1
        assert max(per_second) <= 40, per_second  # 20 a second on average: no second holds a burst
        await clock.step(30.0, settle_rounds=200)
        for i, times in runs.items():
            assert len(times) == 4
            assert all(abs((b - a) - 10.0) < 1e-6 for a, b in zip(times, times[1:])), times  # the same phase each period
    finally:
        await _stop(task)


async def test_a_late_beat_keeps_its_phase_and_a_busy_one_is_not_started_twice() -> None:
    clock = FakeClock()
    schedule = HeartbeatSchedule(clock=clock)
    started: list[float] = []
    release = asyncio.Event()

    async def slow() -> None:
        started.append(clock.monotonic())
        if len(started) == 1:
            await release.wait()  # the API server stalls on the first renewal

    schedule.add("slow", 10.0, slow, first=1.0)
    task = await _running(schedule)
    try:
        await clock.step(1.0)
        assert started == [1001.0]
        await clock.step(24.5)  # slots at 11 and 21 come while the first run still hangs: skipped
        assert started == [1001.0]
        release.set()
        await settle()
        await clock.step(10.0)  # back on its phase at 31, not 10 s after the stall ended
        assert started == [1001.0, 1031.0]
    finally:
        await _stop(task)


async def test_a_failed_beat_retries_sooner_then_returns_to_its_phase() -> None:
    clock = FakeClock()
    schedule = HeartbeatSchedule(clock=clock)
    times: list[float] = []

    async def flaky() -> float | None:
        times.append(clock.monotonic())
        return 1.0 if len(times) == 1 else None

    schedule.add("flaky", 10.0, flaky, first=2.0)
    task = await _running(schedule)
    try:
        await clock.step(20.0)
        assert times == [1002.0, 1003.0, 1012.0]
    finally:
        await _stop(task)


async def test_a_beat_added_while_the_schedule_sleeps_runs_at_its_own_time() -> None:
    """The schedule sleeps until its earliest beat; a beat added meanwhile that is due sooner wakes
    it (a node registered while the others' beats wait), one due later does not need to."""
    clock = FakeClock()
    schedule = HeartbeatSchedule(clock=clock)
    times: dict[str, list[float]] = {"slow": [], "soon": [], "late": []}

    def action(name: str):  # type: ignore[no-untyped-def]
        async def run() -> None:
            times[name].append(clock.monotonic())
        return run

    schedule.add("slow", 30.0, action("slow"), first=9.0)
    task = await _running(schedule)
    try:
        await clock.step(1.0)
        schedule.add("soon", 10.0, action("soon"), first=2.0)
        schedule.add("late", 10.0, action("late"), first=15.0)
        await settle()  # (the schedule's turn to see them, as it would have between two timers)
        await clock.step(20.0)
        assert times == {"slow": [1009.0], "soon": [1003.0, 1013.0], "late": [1016.0]}
    finally:
        await _stop(task)


async def test_with_a_tick_the_beats_due_within_it_run_together_each_still_once_a_period() -> None:
    """The simulated nodes' schedule wakes on a 0.1 s grid: the beats due within a tick run at its
    end, together (their requests reach the server in one pass); each beat still runs once a
    period, at the same point of it, less than a tick late."""
    clock = FakeClock()
    schedule = HeartbeatSchedule(clock=clock, rng=random.Random(3), tick=0.1)
    runs: dict[int, list[float]] = {i: [] for i in range(300)}

    def action(i: int):  # type: ignore[no-untyped-def]
        async def run() -> None:
            runs[i].append(clock.monotonic())
        return run

    beats = [schedule.add(f"b{i}", 10.0, action(i)) for i in range(300)]
    task = await _running(schedule)
    try:
        await clock.step(30.0, settle_rounds=50)
        moments = {t for times in runs.values() for t in times}
        assert all(abs(t * 10 - round(t * 10)) < 1e-6 for t in moments)  # on the grid only
        assert len(moments) <= 3 * 100  # at most one wake-up a tick, however many beats
        assert max(len([i for i, times in runs.items() if times and times[0] == t]) for t in moments) > 1  # together
        for i, times in runs.items():
            assert len(times) == 3
            assert all(abs((b - a) - 10.0) < 1e-6 for a, b in zip(times, times[1:])), times
            # its own point of the period: under a tick late (or, as without a tick, within a millisecond early)
            assert -0.001 - 1e-9 <= times[0] - beats[i].phase < 0.1 + 1e-6
    finally:
        await _stop(task)


def test_a_period_must_be_positive() -> None:
    with pytest.raises(ValueError):
        HeartbeatSchedule(clock=FakeClock()).add("x", 0, lambda: asyncio.sleep(0))  # type: ignore[arg-type,return-value]
