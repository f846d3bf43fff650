"""Exponential backoff with jitter on a fake clock."""

from __future__ import annotations

import asyncio

import pytest

from k8py.client.backoff import Backoff
from k8py.client.clock import FakeClock, settle


def test_delays_double_up_to_the_cap_without_jitter():
    backoff = Backoff(initial=1, cap=10, jitter=0, clock=FakeClock())
    assert [backoff.next_delay() for _ in range(6)] == [1, 2, 4, 8, 10, 10]


def test_jitter_stretches_each_delay_by_at_most_its_fraction():
    backoff = Backoff(initial=1, cap=100, jitter=0.5, clock=FakeClock(), rng=lambda: 1.0)
    assert [backoff.next_delay() for _ in range(3)] == [1.5, 3.0, 6.0]
    low = Backoff(initial=1, cap=100, jitter=0.5, clock=FakeClock(), rng=lambda: 0.0)
    assert low.next_delay() == 1


def test_a_quiet_period_resets_the_backoff():
    clock = FakeClock()
    backoff = Backoff(initial=1, cap=100, jitter=0, reset_after=60, clock=clock)
    backoff.next_delay(), backoff.next_delay(), backoff.next_delay()
    clock.advance(61)
    assert backoff.next_delay() == 1


async def test_wait_sleeps_on_the_injected_clock():
    clock = FakeClock()
    backoff = Backoff(initial=2, cap=8, jitter=0, clock=clock)
    task = asyncio.create_task(backoff.wait())
    await settle()
    assert clock.sleepers() == 1
    clock.advance(1.9)
    await settle()
    assert not task.done()
    clock.advance(0.1)
    await settle()
    assert task.done() and task.result() == 2


def test_invalid_parameters_are_rejected():
    with pytest.raises(ValueError):
        Backoff(initial=0)
