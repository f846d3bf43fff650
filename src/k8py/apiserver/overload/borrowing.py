"""Seat borrowing between priority levels (upstream's APF concurrency borrowing, KEP-1040).

Each Limited level has, from its PriorityLevelConfiguration and the server's
total seats:

- ``nominal`` = ``ceil(total * nominalConcurrencyShares / sum of shares)``;
- ``lendable`` = ``round(nominal * lendablePercent / 100)``: seats it may lend
  when it does not need them, so ``lower = nominal - lendable`` are always
  its own;
- ``borrowing`` = ``round(nominal * borrowingLimitPercent / 100)``, no limit
  when the field is unset: ``upper = nominal + borrowing`` (at most the total).

Between adjustments (every ``period`` seconds, upstream 10 s) each level's
*seat demand* (seats in use plus seats of the requests it queues) is
integrated over time by :class:`SeatDemand`: its time-weighted average, its
standard deviation and its high-water mark. At an adjustment the level's
``envelope`` is average plus one deviation, its ``smoothed`` demand is
``max(envelope, 0.977 * smoothed + 0.023 * envelope)`` (quick to rise, slow to
fall, so a level that was busy a moment ago keeps its seats a while), and its
``target`` is ``max(lower, smoothed)``. :func:`allocate` then shares the
total out: every level gets ``clamp(fair * target, lower, upper)`` for the one
fair proportion ``fair`` that makes them add up to the total (found by
bisection; upstream's ``computeConcurrencyAllocation``), rounded, and that is
the level's *current* limit — the seats its :class:`~.fair_queuing.QueueSet`
dispatches into. So a busy level borrows the seats idle ones can lend, and
gives them back as its demand falls.

Exempt levels take no seats and lend none here (upstream lets an exempt level
lend its nominal seats; with the bootstrap ``exempt`` level's 0 shares that is
nothing). Pure arithmetic plus a clock; the filter runs the adjustments.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

__all__ = ["LevelLimits", "SeatDemand", "allocate", "level_limits", "SMOOTHING"]

#: upstream's seatDemandSmoothingCoefficient
SMOOTHING = 0.977


@dataclass(frozen=True)
class LevelLimits:
    nominal: int
    lendable: int
    borrowing: int | None

    @property
    def lower(self) -> int:
        return self.nominal - self.lendable

    def upper(self, total: int) -> int:
        return total if self.borrowing is None else min(total, self.nominal + self.borrowing)


def _round(x: float) -> int:
    """Half away from zero, as Go's math.Round (Python's round() goes to even)."""
    return int(math.floor(x + 0.5))


def level_limits(total: int, shares: int, shares_total: int, lendable_percent: int,
                 borrowing_limit_percent: int | None) -> LevelLimits:
    nominal = max(1, math.ceil(total * shares / max(1, shares_total)))
    lendable = min(nominal, _round(nominal * max(0, lendable_percent) / 100))
    borrowing = None if borrowing_limit_percent is None else _round(nominal * max(0, borrowing_limit_percent) / 100)
    return LevelLimits(nominal, lendable, borrowing)


@dataclass
class SeatDemand:
    """The time integral of one level's seat demand since the last :meth:`reset`."""

    clock: Callable[[], float] = time.monotonic
    current: int = 0
    high_watermark: int = 0
    smoothed: float = 0.0
    _since: float = field(default=-1.0)
    _last: float = 0.0
    _sum: float = 0.0
    _sum_squares: float = 0.0

    def __post_init__(self) -> None:
        self._since = self._last = self.clock()

    def _advance(self) -> None:
        now = self.clock()
        dt = max(0.0, now - self._last)
        self._sum += self.current * dt
        self._sum_squares += self.current * self.current * dt
        self._last = now

    def observe(self, seats: int) -> None:
        if seats == self.current:
            return
        self._advance()
        self.current = seats
        self.high_watermark = max(self.high_watermark, seats)

    def reset(self) -> tuple[float, float, int]:
        """(average, standard deviation, high-water mark) since the last reset; a new period begins."""
        self._advance()
        span = self._last - self._since
        if span > 0:
            average = self._sum / span
            deviation = math.sqrt(max(0.0, self._sum_squares / span - average * average))
        else:
            average, deviation = float(self.current), 0.0
        high = self.high_watermark
        self._since, self._sum, self._sum_squares, self.high_watermark = self._last, 0.0, 0.0, self.current
        return average, deviation, high

    def update_smoothed(self) -> float:
        """Close the period: fold its envelope into the smoothed demand (the adjustment's input)."""
        average, deviation, _ = self.reset()
        envelope = average + deviation
        self.smoothed = max(envelope, SMOOTHING * self.smoothed + (1 - SMOOTHING) * envelope)
        return self.smoothed


def allocate(total: int, items: Sequence[tuple[float, float, float]]) -> tuple[list[int], float]:
    """Current limits for ``items`` of (lower, upper, target) adding up to ``total``; and the fair proportion.

    When even every level's upper bound (or lower bound) cannot make the total,
    the bounds themselves are the answer; when the targets are too small to make
    it (every level idle), what is left is shared by the room each has below
    its upper bound.
    """
    if not items:
        return [], 0.0

    def shares(fair: float) -> list[float]:
        return [min(max(fair * target, lower), upper) for lower, upper, target in items]

    if sum(upper for _, upper, _ in items) <= total:
        return [int(upper) for _, upper, _ in items], math.inf
    if sum(lower for lower, _, _ in items) >= total:
        return [int(lower) for lower, _, _ in items], 0.0
    low, high = 0.0, 1.0
    while sum(shares(high)) < total and high < 1e12:
        high *= 2
    for _ in range(60):
        mid = (low + high) / 2
        if sum(shares(mid)) < total:
            low = mid
        else:
            high = mid
    exact = shares(high)
    leftover = total - sum(exact)
    if leftover > 1e-9:  # the targets are too small to make the total: the rest by room left (idle levels)
        room = [upper - x for x, (_, upper, _) in zip(exact, items)]
        exact = [x + leftover * r / sum(room) for x, r in zip(exact, room)]
    limits = [math.floor(x + 1e-9) for x in exact]
    # hand out the seats rounding down left over, largest fractions first, within each upper bound
    spare = total - sum(limits)
    order = sorted(range(len(items)), key=lambda i: exact[i] - limits[i], reverse=True)
    while spare > 0 and any(limits[i] < items[i][1] for i in order):
        for i in order:
            if spare > 0 and limits[i] < items[i][1]:
                limits[i] += 1
                spare -= 1
    return limits, high
