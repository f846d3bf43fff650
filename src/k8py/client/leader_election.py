"""Leader election on a coordination.k8s.io/v1 Lease (client-go ``leaderelection``).

Several replicas of a component run a :class:`LeaderElector` on the same
Lease; at most one of them acts at a time::

    elector = LeaderElector(client, "kube-system", "my-controller", identity=pod_name,
                            on_started_leading=controller.run)
    await elector.run()      # returns when leadership is lost; cancel to release and stop

The algorithm is client-go's, step for step:

- **acquire**: every ``retry_period`` (jittered up to ``retry_period * 2.2``,
  ``JitterFactor`` 1.2) read the Lease; create it if it does not exist; take
  it over when its holder is empty or the lease has expired, bumping
  ``leaseTransitions``.
- **expiry is judged on the local clock**: a lease is valid while
  ``observed_time + leaseDurationSeconds`` is in the future, where
  ``observed_time`` is when *this* process last saw the Lease's spec change
  (the holder's renewals change ``renewTime``). Comparing the holder's
  ``renewTime`` with our own wall clock would make election depend on clock
  skew between machines; upstream avoids that and so do we. A consequence: a
  candidate that starts while a dead holder's lease is still on record waits
  one full lease duration before taking over.
- **renew**: the leader updates the Lease every ``retry_period``; one renewal
  may retry (every ``retry_period``) for at most ``renew_deadline``. If it
  cannot renew within that deadline it stops leading: ``run`` cancels the
  leading task, calls ``on_stopped_leading`` and returns. Because
  ``renew_deadline < lease_duration``, the old leader has stopped before any
  other candidate can consider the lease expired (on comparable clocks).
- **optimistic concurrency**: every write is a PUT carrying the
  ``resourceVersion`` last read; a 409 Conflict means another candidate wrote
  first, so this attempt failed (the next one re-reads).
- **release** (``release_on_cancel``): when ``run`` is cancelled while
  leading, the Lease is written with ``holderIdentity: ""`` and
  ``leaseDurationSeconds: 1`` so that another candidate can take over at once.

Timing constraints (checked as ``NewLeaderElector`` does):
``lease_duration > renew_deadline > retry_period * 1.2 > 0``.

Times come from an injectable :class:`~k8py.client.clock.Clock`: durations
from ``monotonic()``, Lease timestamps (MicroTime,
``2026-11-30T08:00:00.000000Z``) from ``now()``.

Callbacks may be plain functions or coroutine functions. ``on_started_leading``
returning an awaitable is run as the named task ``<lock>-leading`` and is
cancelled when leadership ends; if it raises, ``run`` releases the lease and
re-raises. ``on_stopped_leading`` is called once when a term of leadership
ends (unlike client-go, not when ``run`` ends without ever leading).
``on_new_leader(identity)`` is called whenever the observed holder changes.

If an :class:`~k8py.client.event_recorder.EventRecorder` is passed, the
elector records ``Normal LeaderElection "<identity> became leader"`` /
``"... stopped leading"`` on the Lease, as client-go's resource locks do.

The lock and its record (:class:`LeaseLock`, :class:`LeaderElectionRecord`,
MicroTime helpers) live in :mod:`k8py.client.lease_lock` and are re-exported here.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import random
from dataclasses import replace
from typing import Any, Awaitable, Callable, Coroutine, TypeVar

from k8py.api.errors import Conflict, NotFound
from k8py.client.clock import Clock, RealClock
from k8py.client.lease_lock import LeaderElectionRecord, LeaseLock, micro_time, parse_micro_time
from k8py.client.rest import RestClient

__all__ = ["LeaderElector", "LeaseLock", "LeaderElectionRecord", "JITTER_FACTOR", "micro_time", "parse_micro_time"]

logger = logging.getLogger(__name__)

JITTER_FACTOR = 1.2
"""client-go's ``JitterFactor``: acquire retries wait ``retry_period * (1 + rand * 1.2)``."""

_R = TypeVar("_R")
Callback = Callable[..., Any]


async def _call(callback: Callback | None, *args: Any) -> None:
    if callback is None:
        return
    result = callback(*args)
    if inspect.isawaitable(result):
        await result


class LeaderElector:
    """See the module docstring."""

    def __init__(
        self,
        client: RestClient,
        lock_namespace: str,
        lock_name: str,
        identity: str,
        *,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        on_started_leading: Callback,
        on_stopped_leading: Callback | None = None,
        on_new_leader: Callback | None = None,
        release_on_cancel: bool = True,
        clock: Clock | None = None,
        event_recorder: Any = None,
        rng: Callable[[], float] = random.random,
    ) -> None:
        if lease_duration <= renew_deadline:
            raise ValueError("leaseDuration must be greater than renewDeadline")
        if renew_deadline <= JITTER_FACTOR * retry_period:
            raise ValueError("renewDeadline must be greater than retryPeriod*JitterFactor")
        if retry_period <= 0:
            raise ValueError("retryPeriod must be greater than zero")
        if lease_duration < 1:
            raise ValueError("leaseDuration must be at least one second (leaseDurationSeconds is whole seconds)")
        if not identity:
            raise ValueError("Lock identity is empty")
        if on_started_leading is None:
            raise ValueError("OnStartedLeading callback must not be nil")
        self.lock = LeaseLock(client, lock_namespace, lock_name, identity=identity, event_recorder=event_recorder)
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.release_on_cancel = release_on_cancel
        self._on_started_leading = on_started_leading
        self._on_stopped_leading = on_stopped_leading
        self._on_new_leader = on_new_leader
        self._clock: Clock = clock if clock is not None else RealClock()
        self._rng = rng
        self._observed = LeaderElectionRecord()
        self._observed_spec: dict[str, Any] | None = None
        self._observed_time = float("-inf")
        self._reported_leader: str | None = None
        self._background: set[asyncio.Task[Any]] = set()

    # -- state -------------------------------------------------------------------------------

    def is_leader(self) -> bool:
        """Whether the last observed record names this candidate as holder."""
        return self._observed.holder_identity == self.identity

    @property
    def leader(self) -> str:
        """The holder identity last observed (``""`` if none)."""
        return self._observed.holder_identity

    @property
    def observed_record(self) -> LeaderElectionRecord:
        return self._observed

    def _lease_valid(self) -> bool:
        return self._observed_time + self._observed.lease_duration_seconds > self._clock.monotonic()

    def _set_observed(self, record: LeaderElectionRecord) -> None:
        self._observed = record
        self._observed_time = self._clock.monotonic()

    # -- the loop ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Acquire, lead until leadership is lost, then return. Cancel to stop (releasing if leading)."""
        await self.acquire()
        leading: asyncio.Task[Any] | None = None
        renewer = asyncio.create_task(self.renew(), name=f"{self.lock.describe()}-renew")
        try:
            result = self._on_started_leading()
            if inspect.isawaitable(result):
                leading = asyncio.ensure_future(result)
                leading.set_name(f"{self.lock.describe()}-leading")
                await asyncio.wait({renewer, leading}, return_when=asyncio.FIRST_COMPLETED)
                if leading.done() and not leading.cancelled() and leading.exception() is not None:
                    leading.result()  # the leader's work failed: stop leading and raise it
                if leading.done() and not renewer.done():
                    await renewer  # the work finished: keep the lease until cancelled, as upstream
            else:
                await renewer
        finally:
            for task in (renewer, leading):
                if task is not None and not task.done():
                    task.cancel()
            await asyncio.wait([t for t in (renewer, leading) if t is not None])
            if self.release_on_cancel:
                await self.release()
            await _call(self._on_stopped_leading)

    async def acquire(self) -> None:
        """Try every jittered ``retry_period`` until this candidate holds the lease."""
        logger.info("attempting to acquire leader lease", extra={"lease": self.lock.describe(), "identity": self.identity})
        while True:
            acquired = await self._try_acquire_or_renew()
            self._maybe_report_transition()
            if acquired:
                self.lock.record_event("became leader")
                logger.info("successfully acquired lease", extra={"lease": self.lock.describe(), "identity": self.identity})
                return
            await self._clock.sleep(self.retry_period * (1.0 + self._rng() * JITTER_FACTOR))

    async def renew(self) -> None:
        """Renew every ``retry_period``; return once a renewal misses ``renew_deadline``."""
        while True:
            renewed = await self._renew_within_deadline()
            self._maybe_report_transition()
            if not renewed:
                self.lock.record_event("stopped leading")
                logger.info("failed to renew lease", extra={"lease": self.lock.describe(), "identity": self.identity})
                return
            await self._clock.sleep(self.retry_period)

    async def _renew_within_deadline(self) -> bool:
        deadline = self._clock.monotonic() + self.renew_deadline
        while True:
            remaining = deadline - self._clock.monotonic()
            if remaining <= 0:
                return False
            if await self._within(remaining, self._try_acquire_or_renew(), default=False):
                return True
            # PollImmediateUntil: the next try is a retry period away, and the
            # deadline ends the wait (so stepping down happens at the deadline)
            await self._clock.sleep(min(self.retry_period, deadline - self._clock.monotonic()))

    async def release(self) -> bool:
        """Give the lease up if this candidate holds it (holder ``""``, duration 1 s)."""
        if not self.is_leader():
            return True
        now = micro_time(self._clock.now())
        record = LeaderElectionRecord(
            holder_identity="", lease_duration_seconds=1, acquire_time=now, renew_time=now,
            leader_transitions=self._observed.leader_transitions,
        )
        async def write() -> bool:
            try:
                await self.lock.update(record)
            except Conflict:
                # a renewal cut short by the shutdown may have been written without our
                # seeing its answer: read the Lease again, and release it if still ours
                if (await self.lock.get()).holder_identity != self.identity:
                    return True
                await self.lock.update(record)
            return True

        try:
            released = await self._within(self.renew_deadline, write(), default=False)
        except Exception as err:  # noqa: BLE001 - release is best effort, as upstream
            logger.error("failed to release lease", extra={"lease": self.lock.describe(), "error": repr(err)})
            return False
        if not released:
            logger.error("failed to release lease: timed out", extra={"lease": self.lock.describe()})
            return False
        self._set_observed(record)
        logger.info("released lease", extra={"lease": self.lock.describe(), "identity": self.identity})
        return True

    # -- one attempt ---------------------------------------------------------------------------

    async def _try_acquire_or_renew(self) -> bool:
        now = micro_time(self._clock.now())
        record = LeaderElectionRecord(
            holder_identity=self.identity, lease_duration_seconds=int(self.lease_duration), acquire_time=now, renew_time=now,
        )
        # Fast path: we hold a valid lease, so write without reading first.
        if self.is_leader() and self._lease_valid():
            record = replace(record, acquire_time=self._observed.acquire_time, leader_transitions=self._observed.leader_transitions)
            try:
                await self.lock.update(record)
            except Exception as err:  # noqa: BLE001 - any failure falls back to the slow path
                logger.info("failed to update lease optimistically, falling back to slow path",
                            extra={"lease": self.lock.describe(), "error": repr(err)})
            else:
                self._set_observed(record)
                return True
        # 1. Obtain the lease, or create it.
        try:
            old = await self.lock.get()
        except NotFound:
            try:
                await self.lock.create(record)
            except Exception as err:  # noqa: BLE001 - a lost create race is an ordinary failure
                logger.info("error initially creating lease lock", extra={"lease": self.lock.describe(), "error": repr(err)})
                return False
            self._set_observed(record)
            return True
        except Exception as err:  # noqa: BLE001 - the loop retries
            logger.warning("error retrieving lease lock", extra={"lease": self.lock.describe(), "error": repr(err)})
            return False
        # 2. Track when we last saw the record change; respect a valid lease held by another.
        spec = old.to_spec()
        if spec != self._observed_spec:
            self._set_observed(old)
            self._observed_spec = spec
        if old.holder_identity and self._lease_valid() and not self.is_leader():
            logger.debug("lock is held and has not yet expired", extra={"lease": self.lock.describe(), "holder": old.holder_identity})
            return False
        # 3. Take it over (or renew it) with a conditional update.
        if self.is_leader():
            record = replace(record, acquire_time=old.acquire_time, leader_transitions=old.leader_transitions)
        else:
            record = replace(record, leader_transitions=old.leader_transitions + 1)
        try:
            await self.lock.update(record)
        except Exception as err:  # noqa: BLE001 - a Conflict means someone else won this round
            logger.info("failed to update lease", extra={"lease": self.lock.describe(), "error": repr(err)})
            return False
        self._set_observed(record)
        return True

    def _maybe_report_transition(self) -> None:
        holder = self._observed.holder_identity
        if holder == self._reported_leader:
            return
        self._reported_leader = holder
        if self._on_new_leader is None:
            return
        result = self._on_new_leader(holder)
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(result)
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _within(self, seconds: float, coro: Coroutine[Any, Any, _R] | Awaitable[_R], *, default: _R) -> _R:
        """``await coro`` for at most ``seconds`` of the elector's clock, else cancel it and return ``default``."""
        task = asyncio.ensure_future(coro)
        timer = asyncio.ensure_future(self._clock.sleep(seconds))
        try:
            await asyncio.wait({task, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
            if not task.done():
                task.cancel()
                await asyncio.wait({task})  # never re-raises, so our own cancellation is not swallowed
        if task.cancelled():
            return default
        return task.result()
