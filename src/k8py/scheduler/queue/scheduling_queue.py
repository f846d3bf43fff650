"""The scheduling queue: which pod the scheduler tries next, and when a pod
that did not fit is tried again (upstream ``PriorityQueue``).

Four places a pending pod can be (exactly one at a time, keyed ``ns/name``):

- **active**: a heap ordered by the profile's QueueSort (``less``); ``pop``
  hands out its head and waits while it is empty. A QueueSort that gives a
  ``sort_key`` (a key whose ``<`` is its ``less``, as PrioritySort's
  ``(-priority, arrival)``) is compared in C as part of a tuple: heap pushes
  and pops cost a dozen comparisons each with 10,000 pods queued, and three
  Python calls per comparison were 7% of the scheduler's CPU;
- **backoff** (:mod:`.backoff_queue`): pods that failed and wait out ``initial_backoff * 2**(attempts-1)``
  (capped at ``max_backoff``) from their last failure; ``flush_backoff``
  moves the expired ones to active. :meth:`run` calls it when the earliest
  backoff ends (and at least every second), where upstream's ticks every
  second: a pod moved by an event with 0.2 s of backoff left waits 0.2 s,
  not up to 1.2 s. And while the active queue is empty, ``pop`` takes the
  backoff pod whose backoff ends first (KEP-5142, upstream's
  ``SchedulerPopFromBackoffQ``, on by default since 1.33; ``pop_from_backoff``)
  — except one backing off after an error, whose backoff is the retry rate
  limit: a new cluster's first pod, tried before its node's not-ready taint
  went and moved back by the Node update, no longer sits out its second;
- **unschedulable**: pods no node fits. A cluster event moves one back (to
  backoff if its backoff has not expired, else active) only when a plugin
  that rejected it registered that event and its queueing hint says the
  event may help; every pod is moved anyway after ``max_in_unschedulable``
  (5 minutes, checked every 30 s);
- **gated**: a PreEnqueue plugin (SchedulingGates) refused the pod; an update
  of the pod re-runs PreEnqueue.

In flight: a popped pod is tracked until ``done``. If any move request
happened after its cycle started, a failure sends it to backoff instead of
unschedulable (the event it missed may have made it fit).

The queue owns the :class:`~.nominator.Nominator` (``nominator``): pods that
preemption nominated to a node, so filters can account for them; a pod deleted
from the queue loses its nomination.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from typing import Any, Callable, Iterable

from k8py.client.clock import Clock, RealClock
from k8py.scheduler.framework.interfaces import ClusterEventHint
from k8py.scheduler.framework.status import Status
from k8py.scheduler.framework.types import PodInfo, QueuedPodInfo
from k8py.scheduler.queue.backoff_queue import BackoffQueue
from k8py.scheduler.queue.nominator import Nominator

__all__ = ["SchedulingQueue", "ACTIVE", "BACKOFF", "UNSCHEDULABLE", "GATED"]

logger = logging.getLogger(__name__)

ACTIVE, BACKOFF, UNSCHEDULABLE, GATED = "active", "backoff", "unschedulable", "gated"
Less = Callable[[QueuedPodInfo, QueuedPodInfo], bool]
SortKey = Callable[[QueuedPodInfo], Any]
PreEnqueue = Callable[[PodInfo], Status | None]
Object = dict[str, Any]


class _Entry:
    __slots__ = ("qpi", "live")

    def __init__(self, qpi: QueuedPodInfo) -> None:
        self.qpi = qpi
        self.live = True


class _LessKey:
    """The sort key of a QueueSort that has only ``less``."""

    __slots__ = ("qpi", "less")

    def __init__(self, qpi: QueuedPodInfo, less: Less) -> None:
        self.qpi = qpi
        self.less = less

    def __lt__(self, other: _LessKey) -> bool:
        return self.less(self.qpi, other.qpi)


class SchedulingQueue:
    def __init__(
        self,
        *,
        less: Less,
        sort_key: SortKey | None = None,
        pre_enqueue: PreEnqueue | None = None,
        hints: dict[str, list[ClusterEventHint]] | None = None,
        clock: Clock | None = None,
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        max_in_unschedulable: float = 300.0,
        on_change: Callable[[], None] | None = None,
        pop_from_backoff: bool = True,
    ) -> None:
        self.less = less
        self.sort_key: SortKey = sort_key if sort_key is not None else (lambda qpi: _LessKey(qpi, less))
        self.pre_enqueue = pre_enqueue or (lambda pod: None)
        self.hints = hints or {}
        self.clock: Clock = clock or RealClock()
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_in_unschedulable = max_in_unschedulable
        self._on_change = on_change
        #: (sort key, arrival sequence, entry): equal keys pop in the order pushed
        self._active: list[tuple[Any, int, _Entry]] = []
        self._active_entries: dict[str, _Entry] = {}
        self._backoff = BackoffQueue(pop_early=pop_from_backoff)
        self._unschedulable: dict[str, QueuedPodInfo] = {}
        self._gated: dict[str, QueuedPodInfo] = {}
        self._in_flight: dict[str, QueuedPodInfo] = {}
        self._seq = itertools.count()
        self._wakeup = asyncio.Event()
        #: set when a backoff ends sooner than :meth:`run` is asleep for
        self._backoff_sooner = asyncio.Event()
        self.scheduling_cycle = 0
        self.move_request_cycle = -1
        #: pods preemption nominated to a node (:mod:`.nominator`)
        self.nominator = Nominator()
        self.closed = False

    # -- sizes -----------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        return {ACTIVE: len(self._active_entries), BACKOFF: len(self._backoff.pods),
                UNSCHEDULABLE: len(self._unschedulable), GATED: len(self._gated)}

    def where(self, key: str) -> str | None:
        for name, place in ((ACTIVE, self._active_entries), (BACKOFF, self._backoff.pods),
                            (UNSCHEDULABLE, self._unschedulable), (GATED, self._gated)):
            if key in place:
                return name
        return "in-flight" if key in self._in_flight else None

    def __len__(self) -> int:
        return len(self._active_entries) + len(self._backoff.pods) + len(self._unschedulable) + len(self._gated)

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change()

    # -- placing ---------------------------------------------------------------------

    def _push_active(self, qpi: QueuedPodInfo) -> None:
        entry = _Entry(qpi)
        self._active_entries[qpi.key] = entry
        heapq.heappush(self._active, (self.sort_key(qpi), next(self._seq), entry))
        self._wakeup.set()

    def _push_backoff(self, qpi: QueuedPodInfo, *, error: bool = False) -> None:
        if self._backoff.push(qpi, qpi.timestamp + self.backoff_duration(qpi), error=error):
            self._backoff_sooner.set()
        if not error and self._backoff.pop_early:
            self._wakeup.set()

    def _forget(self, key: str) -> QueuedPodInfo | None:
        entry = self._active_entries.pop(key, None)
        if entry is not None:
            entry.live = False
            return entry.qpi
        qpi = self._backoff.discard(key)
        if qpi is not None:
            return qpi
        for place in (self._unschedulable, self._gated):
            qpi = place.pop(key, None)
            if qpi is not None:
                return qpi
        return None

    def backoff_duration(self, qpi: QueuedPodInfo) -> float:
        duration = self.initial_backoff
        for _ in range(1, qpi.attempts):
            duration *= 2
            if duration >= self.max_backoff:
                return self.max_backoff
        return duration

    def _gate(self, qpi: QueuedPodInfo) -> bool:
        """Run PreEnqueue: True (and the pod is gated) if a plugin holds it back."""
        status = self.pre_enqueue(qpi.info)
        if status is not None and not status.is_success():
            qpi.gated = True
            qpi.gating_plugin = status.plugin
            self._gated[qpi.key] = qpi
            return True
        qpi.gated = False
        return False

    def _enqueue(self, qpi: QueuedPodInfo) -> str:
        """Run PreEnqueue and put the pod in active, or gated."""
        if self._gate(qpi):
            return GATED
        self._push_active(qpi)
        return ACTIVE

    def add(self, pod: Object | PodInfo) -> str:
        """A new pending pod; returns where it went."""
        info = pod if isinstance(pod, PodInfo) else PodInfo(pod)
        self._forget(info.key)
        qpi = QueuedPodInfo(info, self.clock.monotonic())
        where = self._enqueue(qpi)
        self._changed()
        return where

    def update(self, new: Object, *, requeue: bool = True) -> str | None:
        """The pending pod changed. Gated: PreEnqueue again; unschedulable: try it
        again if ``requeue`` (its spec or labels changed, not just its status)."""
        info = PodInfo(new)
        key = info.key
        if key in self._in_flight:
            self._in_flight[key].info = info
            return "in-flight"
        entry = self._active_entries.get(key)
        if entry is not None:
            entry.qpi.info = info
            return ACTIVE
        if key in self._backoff.pods:
            self._backoff.pods[key].info = info
            return BACKOFF
        qpi = self._gated.pop(key, None)
        if qpi is not None:
            qpi.info = info
            where = self._enqueue(qpi)
            self._changed()
            return where
        qpi = self._unschedulable.get(key)
        if qpi is not None and not requeue:
            qpi.info = info
            return UNSCHEDULABLE
        qpi = self._unschedulable.pop(key, None)
        if qpi is not None:
            qpi.info = info
            where = self._requeue(qpi)
            self._changed()
            return where
        return self.add(info)

    def delete(self, key: str) -> None:
        self._forget(key)
        self._in_flight.pop(key, None)
        self.nominator.delete(key)
        self._changed()

    # -- scheduling ----------------------------------------------------------------------

    async def pop(self) -> QueuedPodInfo:
        """The next pod to schedule (waits while the active queue is empty)."""
        while True:
            qpi = self.pop_nowait()
            if qpi is not None:
                return qpi
            self._wakeup.clear()
            await self._wakeup.wait()

    def pop_nowait(self) -> QueuedPodInfo | None:
        """As :meth:`pop`, but ``None`` when there is nothing to pop."""
        while self._active:
            entry = heapq.heappop(self._active)[2]
            if not entry.live:
                continue
            del self._active_entries[entry.qpi.key]
            return self._take(entry.qpi)
        # the active queue is empty: the pod whose backoff ends first, if it backs off for
        # having been unschedulable (see the module docstring)
        while (qpi := self._backoff.pop_earliest()) is not None:
            if not self._gate(qpi):
                return self._take(qpi)
        return None

    def _take(self, qpi: QueuedPodInfo) -> QueuedPodInfo:
        qpi.attempts += 1
        if qpi.initial_attempt_timestamp is None:
            qpi.initial_attempt_timestamp = self.clock.monotonic()
        self.scheduling_cycle += 1
        qpi.seq = self.scheduling_cycle
        self._in_flight[qpi.key] = qpi
        self._changed()
        return qpi

    def done(self, key: str) -> None:
        self._in_flight.pop(key, None)

    def add_unschedulable(self, qpi: QueuedPodInfo, *, backoff_only: bool = False) -> str:
        """A popped pod failed. With no rejecting plugins, after an error
        (``backoff_only``) or a move request since its cycle began, it goes to
        backoff; otherwise to unschedulable."""
        self._in_flight.pop(qpi.key, None)
        if qpi.key in self._active_entries or qpi.key in self._backoff.pods or qpi.key in self._unschedulable:
            return "present"
        qpi.timestamp = self.clock.monotonic()
        if backoff_only or not qpi.unschedulable_plugins or self.move_request_cycle >= qpi.seq:
            self._push_backoff(qpi, error=backoff_only)
            where = BACKOFF
        else:
            self._unschedulable[qpi.key] = qpi
            where = UNSCHEDULABLE
        self._changed()
        return where

    def _requeue(self, qpi: QueuedPodInfo) -> str:
        now = self.clock.monotonic()
        if qpi.timestamp + self.backoff_duration(qpi) > now and qpi.attempts > 0:
            self._push_backoff(qpi)
            return BACKOFF
        return self._enqueue(qpi)

    # -- cluster events -----------------------------------------------------------------------

    def _hinted(self, qpi: QueuedPodInfo, resource: str, actions: Iterable[str], old: Any, new: Any) -> bool:
        if not qpi.unschedulable_plugins:
            return True
        actions = set(actions)
        for plugin in qpi.unschedulable_plugins:
            for reg in self.hints.get(plugin, ()):
                if reg.resource != resource or not (reg.actions & actions):
                    continue
                if reg.hint is None:
                    return True
                try:
                    if reg.hint(qpi.info, old, new):
                        return True
                except Exception:  # a hint that fails means: try the pod again
                    logger.exception("queueing hint failed", extra={"plugin": plugin, "pod": qpi.key})
                    return True
        return False

    def move_on_event(self, resource: str, actions: Iterable[str], old: Any = None, new: Any = None) -> int:
        """A cluster event: move the unschedulable pods it may help. Returns how many moved."""
        actions = tuple(actions)
        self.move_request_cycle = self.scheduling_cycle
        moved = 0
        for key, qpi in list(self._unschedulable.items()):
            if self._hinted(qpi, resource, actions, old, new):
                del self._unschedulable[key]
                self._requeue(qpi)
                moved += 1
        if moved:
            self._changed()
        return moved

    def move_all(self) -> int:
        """Move every unschedulable pod (a forced flush)."""
        self.move_request_cycle = self.scheduling_cycle
        pods = list(self._unschedulable.values())
        self._unschedulable.clear()
        for qpi in pods:
            self._requeue(qpi)
        if pods:
            self._changed()
        return len(pods)

    # -- timers ------------------------------------------------------------------------------

    def flush_backoff(self) -> int:
        expired = self._backoff.pop_expired(self.clock.monotonic())
        for qpi in expired:
            self._enqueue(qpi)
        if expired:
            self._changed()
        return len(expired)

    def flush_unschedulable_leftover(self) -> int:
        now = self.clock.monotonic()
        stale = [qpi for qpi in self._unschedulable.values() if now - qpi.timestamp > self.max_in_unschedulable]
        for qpi in stale:
            del self._unschedulable[qpi.key]
            self._requeue(qpi)
        if stale:
            self._changed()
        return len(stale)

    async def run(self) -> None:
        """Flush backoff when the earliest backoff ends (at least every second) and
        leftover unschedulable pods every 30 s, until cancelled."""
        last_leftover = self.clock.monotonic()
        while True:
            now = self.clock.monotonic()
            expiry = self._backoff.next_expiry()
            delay = min(1.0, max(0.0, expiry - now)) if expiry is not None else 1.0
            self._backoff_sooner.clear()
            await self._sleep_or_sooner(delay)
            self.flush_backoff()
            if self.clock.monotonic() - last_leftover >= 30.0:
                last_leftover = self.clock.monotonic()
                self.flush_unschedulable_leftover()

    async def _sleep_or_sooner(self, delay: float) -> None:
        """Sleep ``delay`` on the queue's clock, or less if a backoff that ends sooner is pushed."""
        sleep = asyncio.create_task(self.clock.sleep(delay), name="scheduling-queue-backoff-sleep")
        sooner = asyncio.create_task(self._backoff_sooner.wait(), name="scheduling-queue-backoff-sooner")
        try:
            await asyncio.wait((sleep, sooner), return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleep.cancel()
            sooner.cancel()
