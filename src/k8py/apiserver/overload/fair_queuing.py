"""One Limited priority level's seats and queues: shuffle sharding and fair dispatch.

A :class:`QueueSet` has ``seats`` (the level's nominal concurrency) and, for a
level whose ``limitResponse`` is ``Queue``, ``queues`` FIFO queues. A request
that finds a seat free and nobody waiting runs at once. Otherwise:

- ``Reject`` levels answer ``concurrency-limit``;
- ``Queue`` levels deal the request's flow a *hand* of ``handSize`` queues out
  of ``queues`` (:func:`deal`, from the flow's hash, as upstream's shuffle
  sharding: different flows rarely share a whole hand, so one flooding flow
  fills only its own queues) and put it on the shortest queue of the hand
  (waiting plus executing); a full one (``queueLengthLimit``) answers
  ``queue-full``; a request still waiting after ``wait_limit`` seconds is
  taken out and answered ``time-out``.

When a seat is given back, the next request is dispatched from the queues in
turn (round-robin over the non-empty queues: each flow gets an equal share of
the seats, where upstream orders by virtual finish time; with equal-cost
requests the two agree). Invariant: ``executing <= seats`` except right after
``reconfigure`` shrank the seats, and no request waits while a seat is free.
Single-threaded (the event loop); nothing here blocks.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import deque
from dataclasses import dataclass, field

__all__ = ["QueueSet", "deal", "flow_hash"]


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


@dataclass
class _Waiter:
    flow: int
    future: asyncio.Future[int]


@dataclass
class QueueSet:
    name: str
    seats: int
    queues: int = 0
    hand_size: int = 1
    queue_length_limit: int = 0
    #: seconds a request may wait in a queue
    wait_limit: float = 15.0
    executing: int = 0
    _queues: list[deque[_Waiter]] = field(default_factory=list)
    _executing_by_queue: list[int] = field(default_factory=list)
    _cursor: int = 0
    _waiting: int = 0

    def __post_init__(self) -> None:
        self._queues = [deque() for _ in range(self.queues)]
        self._executing_by_queue = [0] * self.queues

    @property
    def waiting(self) -> int:
        return self._waiting

    def try_acquire(self) -> bool:
        """Take a seat at once if one is free and nobody waits (the common case, no await)."""
        if self.executing < self.seats and not self._waiting:
            self.executing += 1
            return True
        return False

    def reconfigure(self, *, seats: int, queues: int, hand_size: int, queue_length_limit: int) -> None:
        """New limits from a changed PriorityLevelConfiguration; waiting requests keep waiting."""
        self.seats, self.hand_size, self.queue_length_limit = seats, hand_size, queue_length_limit
        if queues != self.queues:
            waiters = [w for q in self._queues for w in q]
            self.queues = queues
            self._queues = [deque() for _ in range(queues)]
            self._executing_by_queue = [0] * queues
            for w in waiters:
                if queues:
                    self._queues[deal(w.flow, queues, hand_size)[0]].append(w)
                else:
                    w.future.cancel()
            self._waiting = sum(len(q) for q in self._queues)
        self._dispatch()

    async def acquire(self, flow: int) -> tuple[int, str]:
        """(the queue index to give back with :meth:`release`, "") once a seat is held, or (-1, reason)."""
        if self.try_acquire():
            return -1, ""
        if not self.queues:
            return -1, "concurrency-limit"
        hand = deal(flow, self.queues, self.hand_size)
        index = min(hand, key=lambda i: len(self._queues[i]) + self._executing_by_queue[i])
        queue = self._queues[index]
        if len(queue) >= self.queue_length_limit:
            return -1, "queue-full"
        waiter = _Waiter(flow, asyncio.get_running_loop().create_future())
        queue.append(waiter)
        self._waiting += 1
        try:
            return await asyncio.wait_for(waiter.future, self.wait_limit), ""
        except asyncio.TimeoutError:
            self._forget(waiter)
            return -1, "time-out"
        except asyncio.CancelledError:
            if waiter.future.done() and not waiter.future.cancelled():
                self.release(waiter.future.result())  # the seat came as the client left: give it on
            else:
                self._forget(waiter)
            raise

    def release(self, index: int) -> None:
        self.executing -= 1
        if 0 <= index < len(self._executing_by_queue):  # (a reconfigure may have renumbered the queues)
            self._executing_by_queue[index] = max(0, self._executing_by_queue[index] - 1)
        self._dispatch()

    def _forget(self, waiter: _Waiter) -> None:
        for q in self._queues:
            try:
                q.remove(waiter)
                self._waiting -= 1
                return
            except ValueError:
                continue

    def _dispatch(self) -> None:
        n = len(self._queues)
        while self.executing < self.seats and n:
            for step in range(n):
                index = (self._cursor + step) % n
                queue = self._queues[index]
                while queue and queue[0].future.done():
                    queue.popleft()  # cancelled meanwhile (by a reconfigure)
                    self._waiting -= 1
                if queue:
                    break
            else:
                return
            waiter = queue.popleft()
            self._waiting -= 1
            self._cursor = (index + 1) % n
            self.executing += 1
            self._executing_by_queue[index] += 1
            waiter.future.set_result(index)
