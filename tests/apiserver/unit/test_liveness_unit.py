"""The one timer that notices gone watch clients (``watch.liveness``)."""

from __future__ import annotations

import asyncio

from k8py.apiserver.watch.clock import ManualClock
from k8py.apiserver.watch.liveness import LivenessSweep


class _Watcher:
    def __init__(self) -> None:
        self.wake = asyncio.Event()


def _boom() -> bool:
    raise RuntimeError("transport exploded")


def test_a_sweep_wakes_only_the_watchers_whose_client_left():
    clock = ManualClock()
    sweep = LivenessSweep(clock, interval=5.0)
    left, staying, broken = _Watcher(), _Watcher(), _Watcher()
    gone = {"left": False}
    sweep.add(left, lambda: gone["left"])
    sweep.add(staying, lambda: False)
    sweep.add(broken, _boom)
    clock.advance(4.9)
    assert sweep.sweeps == 0
    clock.advance(0.2)
    assert sweep.sweeps == 1
    assert not left.wake.is_set() and not staying.wake.is_set()
    assert broken.wake.is_set()  # a check that raises counts as gone
    gone["left"] = True
    clock.advance(5.0)
    assert sweep.sweeps == 2 and left.wake.is_set() and not staying.wake.is_set()


def test_the_timer_runs_only_while_watchers_are_registered():
    clock = ManualClock()
    sweep = LivenessSweep(clock, interval=5.0)
    w = _Watcher()
    sweep.add(w, lambda: False)
    sweep.discard(w)
    clock.advance(20.0)
    assert sweep.sweeps == 0 and len(sweep) == 0
    sweep.add(w, lambda: False)
    clock.advance(5.0)
    clock.advance(5.0)
    assert sweep.sweeps == 2
    sweep.discard(w)
    clock.advance(50.0)
    assert sweep.sweeps == 2
