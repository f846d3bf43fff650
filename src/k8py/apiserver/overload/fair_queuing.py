"""One Limited priority level's seats and queues: shuffle sharding and fair dispatch of requests that take seats.

A :class:`QueueSet` has ``seats`` (the level's *current* concurrency limit:
its nominal seats, plus what it borrows, minus what it lends — see
:mod:`.borrowing`) and, for a level whose ``limitResponse`` is ``Queue``,
``queues`` FIFO queues. Every request takes a *width* of seats (1, or more for
a LIST over many objects: :mod:`.work_estimate`), capped at the level's seats
so it can always run once the level is idle. A request that fits in the free
seats with nobody waiting runs at once. Otherwise:

- ``Reject`` levels answer ``concurrency-limit``;
- ``Queue`` levels deal the request's flow a *hand* of ``handSize`` queues out
  of ``queues`` (:func:`deal`, from the flow's hash, as upstream's shuffle
  sharding: different flows rarely share a whole hand, so one flooding flow
  fills only its own queues) and put it on the shortest queue of the hand
  (waiting plus executing requests); a full one (``queueLengthLimit``)
  answers ``queue-full``; a request still waiting after ``wait_limit`` seconds
  is taken out and answered ``time-out``.

Dispatch is fair queuing by seats: each queue counts the seats it has been
given (its *virtual time*; a queue that wakes up from empty starts at the
level's current virtual time, so idleness is not saved up as credit). When
seats free up, the non-empty queue whose head request would finish first
(its virtual time plus the head's width) sends it, and pays the width (a
request that got seats at once pays too, on the shortest queue of its hand) — so a flow of 10-seat lists gets a
tenth as many requests through as a flow of 1-seat gets, and neither starves
the other (upstream orders by virtual finish time, width times expected
duration; with equal durations the two agree). If that head request does not
fit in the free seats, dispatch waits for more seats rather than letting
narrower requests overtake it, as upstream: wide requests are not starved.

Invariants: ``seats_in_use <= seats`` except right after the seats shrank
(``reconfigure``/``set_seats``), and no request waits while its queue's head
could run. Every change of the seat demand (seats in use plus seats waiting)
is reported to ``demand`` (a :class:`~.borrowing.SeatDemand`) for borrowing.
Single-threaded (the event loop); nothing here blocks. A queue that never held
a request is the shared :data:`_NEVER_USED` (an empty deque takes 760 bytes:
the API server's default levels have some 540 queues, most never used).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

__all__ = ["QueueSet", "Grant", "deal", "flow_hash"]

#: flows whose hands a level remembers (a flow is a user or a namespace: few)
_HANDS_KEPT = 4096


def flow_hash(schema: str, distinguisher: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{schema}\x00{distinguisher}".encode()).digest()[:8], "big")


def deal(hash_value: int, deck: int, hand: int) -> list[int]:
    """``hand`` distinct queue indexes out of ``deck``, picked by ``hash_value`` (a mixed-radix deal)."""
    hand = max(1, min(hand, deck))
    cards: list[int] = []
    remaining = hash_value
    for i in range(hand):
        n = deck - i
        card, remaining = remaining % n, remaining // n
        for taken in sorted(cards):  # skip the cards already dealt, keeping the deal uniform
            if card >= taken:
                card += 1
        cards.append(card)
    return cards


class _NeverUsed(deque):  # type: ignore[type-arg]
    """The empty queue every queue is until a request waits in it: read like any
    empty queue, never written (:meth:`QueueSet._writable` replaces it first)."""

    def append(self, _item: object) -> None:
        raise TypeError("a never-used queue is shared: QueueSet._writable replaces it first")


_NEVER_USED = _NeverUsed()


class DemandObserver(Protocol):
    def observe(self, seats: int) -> None: ...


class Grant(NamedTuple):
    """A request's seats, given back with :meth:`QueueSet.release` (a tuple: one is made per request)."""

    queue: int
    width: int


@dataclass
class _Waiter:
    flow: int
    width: int
    future: asyncio.Future[Grant]


@dataclass
class QueueSet:
    name: str
    seats: int
    queues: int = 0
    hand_size: int = 1
    queue_length_limit: int = 0
    #: seconds a request may wait in a queue
    wait_limit: float = 15.0
    demand: DemandObserver | None = None
    #: requests holding seats, and the seats they hold
    executing: int = 0
    seats_in_use: int = 0
    _queues: list[deque[_Waiter]] = field(default_factory=list)
    _executing_by_queue: list[int] = field(default_factory=list)
    _virtual: list[float] = field(default_factory=list)
    _now: float = 0.0
    _waiting: int = 0
    _waiting_seats: int = 0
    _hands: dict[int, list[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._renumber(self.queues)

    def _renumber(self, queues: int) -> None:
        self._hands = {}
        self.queues = queues
        self._queues = [_NEVER_USED] * queues
        self._executing_by_queue = [0] * queues
        self._virtual = [self._now] * queues

    @property
    def waiting(self) -> int:
        return self._waiting

    @property
    def waiting_seats(self) -> int:
        return self._waiting_seats

    def width(self, asked: int) -> int:
        """The seats a request asking for ``asked`` takes here: at least 1, at most the level's seats."""
        return max(1, min(asked, self.seats))

    def _observe(self) -> None:
        if self.demand is not None:
            self.demand.observe(self.seats_in_use + self._waiting_seats)

    def try_acquire(self, width: int = 1, flow: int | None = None) -> Grant | None:
        """Seats at once if they are free and nobody waits (the common case, no await).

        With ``flow`` given, the seats are charged to the shortest queue of its
        hand, as a queued request's would be: a flow that got seats at once has
        used its share as much as one that waited for them."""
        width = self.width(width)
        if self._waiting or self.seats_in_use + width > self.seats:
            return None
        self.executing += 1
        self.seats_in_use += width
        self._observe()
        if flow is None or not self.queues:
            return Grant(-1, width)
        index = self._shortest(flow)
        self._virtual[index] = max(self._virtual[index], self._now) + width
        self._executing_by_queue[index] += 1
        return Grant(index, width)

    def _deal(self, flow: int) -> list[int]:
        if len(self._hands) >= _HANDS_KEPT:
            self._hands.clear()
        hand = self._hands[flow] = deal(flow, self.queues, self.hand_size)
        return hand

    def _shortest(self, flow: int) -> int:
        hand = self._hands.get(flow)
        if hand is None:  # dealt once per flow while the queues stay as they are
            hand = self._deal(flow)
        queues, executing = self._queues, self._executing_by_queue
        best, best_load = hand[0], len(queues[hand[0]]) + executing[hand[0]]
        for index in hand[1:]:
            load = len(queues[index]) + executing[index]
            if load < best_load:
                best, best_load = index, load
        return best

    def set_seats(self, seats: int) -> None:
        """A new current limit (borrowing moved seats between levels)."""
        if seats != self.seats:
            self.seats = seats
            self._dispatch()

    def reconfigure(self, *, seats: int, queues: int, hand_size: int, queue_length_limit: int) -> None:
        """New limits from a changed PriorityLevelConfiguration; waiting requests keep waiting."""
        if hand_size != self.hand_size:
            self._hands = {}
        self.seats, self.hand_size, self.queue_length_limit = seats, hand_size, queue_length_limit
        if queues != self.queues:
            waiters = [w for q in self._queues for w in q]
            self._renumber(queues)
            for w in waiters:
                if queues:
                    self._writable(deal(w.flow, queues, hand_size)[0]).append(w)
                else:
                    w.future.cancel()
            self._waiting = sum(len(q) for q in self._queues)
            self._waiting_seats = sum(w.width for q in self._queues for w in q)
        self._dispatch()

    async def acquire(self, flow: int, width: int = 1) -> tuple[Grant | None, str]:
        """(the seats to give back with :meth:`release`, "") once they are held, or (None, reason)."""
        grant = self.try_acquire(width, flow)
        if grant is not None:
            return grant, ""
        if not self.queues:
            return None, "concurrency-limit"
        width = self.width(width)
        index = self._shortest(flow)
        if len(self._queues[index]) >= self.queue_length_limit:
            return None, "queue-full"
        queue = self._writable(index)
        waiter = _Waiter(flow, width, asyncio.get_running_loop().create_future())
        if not queue:  # waking up: idle time is not credit
            self._virtual[index] = max(self._virtual[index], self._now)
        queue.append(waiter)
        self._waiting += 1
        self._waiting_seats += width
        self._observe()
        self._dispatch()  # the head of its queue may fit beside a wider one that waits elsewhere
        try:
            return await asyncio.wait_for(asyncio.shield(waiter.future), self.wait_limit), ""
        except asyncio.TimeoutError:
            if waiter.future.done() and not waiter.future.cancelled():
                return waiter.future.result(), ""  # granted in the same turn the wait ran out
            self._forget(waiter)
            return None, "time-out"
        except asyncio.CancelledError:
            if waiter.future.done() and not waiter.future.cancelled():
                self.release(waiter.future.result())  # the seats came as the client left: give them on
            else:
                self._forget(waiter)
            raise

    def _writable(self, index: int) -> deque[_Waiter]:
        queue = self._queues[index]
        if queue is _NEVER_USED:
            queue = self._queues[index] = deque()
        return queue

    def release(self, grant: Grant | None) -> None:
        if grant is None:
            return
        self.executing -= 1
        self.seats_in_use -= grant.width
        queue, executing = grant.queue, self._executing_by_queue
        if 0 <= queue < len(executing):  # (a reconfigure may have renumbered the queues)
            count = executing[queue]
            executing[queue] = count - 1 if count > 0 else 0
        self._observe()
        if self._waiting:
            self._dispatch()

    def _forget(self, waiter: _Waiter) -> None:
        for q in self._queues:
            try:
                q.remove(waiter)
            except ValueError:
                continue
            self._waiting -= 1
            self._waiting_seats -= waiter.width
            self._observe()
            if not waiter.future.done():
                waiter.future.cancel()
            return

    def _next_queue(self) -> int:
        """The non-empty queue whose head would finish first in virtual time (dropping cancelled heads), or -1."""
        best, best_finish = -1, 0.0
        for index, queue in enumerate(self._queues):
            while queue and queue[0].future.done():
                dropped = queue.popleft()  # cancelled meanwhile (by a reconfigure)
                self._waiting -= 1
                self._waiting_seats -= dropped.width
            if queue:
                finish = self._virtual[index] + queue[0].width
                if best < 0 or finish < best_finish:
                    best, best_finish = index, finish
        return best

    def _dispatch(self) -> None:
        dispatched = False
        while self._waiting:
            index = self._next_queue()
            if index < 0:
                break
            queue = self._queues[index]
            head = queue[0]
            width = self.width(head.width)
            if self.seats_in_use + width > self.seats:
                break  # the fairest request waits for seats; nothing narrower overtakes it
            queue.popleft()
            self._waiting -= 1
            self._waiting_seats -= head.width
            self._now = self._virtual[index]
            self._virtual[index] += width
            self.executing += 1
            self.seats_in_use += width
            self._executing_by_queue[index] += 1
            head.future.set_result(Grant(index, width))
            dispatched = True
        if dispatched:
            self._observe()
