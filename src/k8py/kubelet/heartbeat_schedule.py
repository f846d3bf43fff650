"""One timer for many nodes' heartbeats: the simulated kubelet's Lease renewals and Node status checks.

A kubelet runs two loops for its heartbeats (renew the Lease every 10 s,
look at the Node's status every ``node_status_update_frequency``). Thousands
of simulated nodes in one process cannot each have their own loops:

- **memory**: two tasks a node, each with its coroutine frame, its sleep's
  future and timer — at 5,000 nodes, 10,000 of each for work that is a few
  hundred requests a second;
- **bursts**: a loop that sleeps ``interval`` after its renewal *finished*
  drifts by the request's latency. When the API server stalls (ten thousand
  pods starting), every renewal waiting on it finishes at once, and the
  loops, lined up behind the stall, stay lined up: a burst of thousands of
  writes every interval, which is what makes the next stall.

Here every beat (one node's Lease, one node's status) has a fixed **phase**:
it is due at ``phase + k × period`` on the monotonic clock, the phase drawn
uniformly over the first period when the beat is added (so all beats of one
period are spread evenly over it, and stay so). A beat that ran late does not
move its next slot; a beat late by more than a period skips the slots it
missed instead of running them back to back. A beat still running when its
next slot comes is not started twice. An action returns ``None`` (the next
slot) or a delay for a retry sooner (a failed renewal retries after 1 s), after
which the beat goes back to its phase.

One task runs the schedule; each due beat runs as a task of its own, at most
``concurrency`` at a time. Time comes from an injectable :class:`Clock`.

With a ``tick`` (the simulated nodes use 0.1 s), the schedule wakes only at
multiples of it, and runs together every beat that fell due since the last:
each beat still runs once a period, at the same point of it, up to a tick
late. Its requests then reach the API server together, a few dozen in one
pass of its loop and one commit, instead of one at a time: a renewal alone
costs the server its whole per-request round (loop wake-ups, a transaction,
caches gone cold) — measured, about 0.7 ms against 0.3 ms for one of sixteen
in flight (``bench/write_path_bench.py``), and at 5,000 nodes, 250 a second,
the renewals were a quarter of the two cores.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import math
import random
from dataclasses import dataclass
from typing import Awaitable, Callable

from k8py.client.clock import Clock, RealClock

__all__ = ["Beat", "HeartbeatSchedule"]

logger = logging.getLogger(__name__)

#: beats due this soon are run with the ones due now (one wake-up, not one each)
_EARLY = 0.001

Action = Callable[[], Awaitable[float | None]]


@dataclass(eq=False, slots=True)
class Beat:
    name: str
    period: float
    action: Action
    #: slot 0's time; the beat is due at ``phase + k * period``
    phase: float
    due: float
    running: bool = False
    runs: int = 0

    def next_slot(self, now: float) -> float:
        """The first of this beat's slots after ``now`` (a slot within rounding of ``now`` counts as now's)."""
        return self.phase + (math.floor((now - self.phase) / self.period + 1e-9) + 1) * self.period


class HeartbeatSchedule:
    def __init__(self, *, clock: Clock | None = None, concurrency: int = 64, rng: random.Random | None = None,
                 tick: float = 0.0) -> None:
        self.clock = clock or RealClock()
        #: with a tick, the schedule wakes on the tick's grid only: every beat due within a tick runs
        #: at the tick's end, together (see the module docstring)
        self.tick = tick
        self._rng = rng or random.Random()
        self._heap: list[tuple[float, int, Beat]] = []
        self._seq = itertools.count()
        self._limit = asyncio.Semaphore(concurrency)
        self._wake = asyncio.Event()
        #: when the run loop next looks at the heap: a beat pushed due later needs no wake-up (a
        #: finished beat's next slot is a period away; waking for it, 400 times a second at 5,000
        #: nodes, cost the loop two futures and a wait each)
        self._next_look = -math.inf
        self.beats: list[Beat] = []

    def add(self, name: str, period: float, action: Action, *, first: float | None = None) -> Beat:
        """Run ``action`` every ``period`` seconds, first after ``first`` seconds (default: a uniform
        draw over one period, which is the beat's phase)."""
        if period <= 0:
            raise ValueError("a heartbeat needs a period > 0")
        delay = self._rng.uniform(0, period) if first is None else max(0.0, first)
        due = self.clock.monotonic() + delay
        beat = Beat(name, period, action, phase=due, due=due)
        self.beats.append(beat)
        self._push(beat)
        return beat

    def _push(self, beat: Beat) -> None:
        heapq.heappush(self._heap, (beat.due, next(self._seq), beat))
        if beat.due < self._next_look:
            self._wake.set()

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            while True:
                self._wake.clear()
                now = self.clock.monotonic()
                self._next_look = now  # (the heap is read again below, after what is due now)
                while self._heap and self._heap[0][0] <= now + _EARLY:
                    _, _, beat = heapq.heappop(self._heap)
                    if beat.running:  # still busy with the last slot: this one is skipped
                        beat.due = beat.next_slot(max(now, beat.due))
                        self._push(beat)
                        continue
                    beat.running = True
                    tg.create_task(self._fire(beat), name=f"heartbeat-{beat.name}")
                if self._heap:
                    look = self._heap[0][0]
                    if self.tick:
                        look = math.ceil(look / self.tick) * self.tick
                    self._next_look = look
                    await self._sleep(look - now)
                else:
                    self._next_look = math.inf
                    await self._wake.wait()

    async def _sleep(self, seconds: float) -> None:
        sleeper = asyncio.ensure_future(self.clock.sleep(seconds))
        waker = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
            waker.cancel()

    async def _fire(self, beat: Beat) -> None:
        retry: float | None = None
        try:
            async with self._limit:
                retry = await beat.action()
        except asyncio.CancelledError:
            raise
        except Exception:  # the action's own errors are its business; the beat goes on at its next slot
            logger.exception("heartbeat failed", extra={"beat": beat.name})
        finally:
            beat.running = False
            beat.runs += 1
        now = self.clock.monotonic()
        beat.due = now + retry if retry is not None else beat.next_slot(max(now, beat.due))
        self._push(beat)
