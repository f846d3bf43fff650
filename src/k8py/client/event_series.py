"""events.k8s.io/v1 Events with ``series`` (client-go ``tools/events``).

The newer events library replaces the correlator's per-event PATCHes with
*series*: a repeat of an isomorphic event (same ``action``, ``reason``,
``reportingController``, ``regarding`` and ``related``) is counted locally,
and the server sees it at most this often:

- the **first repeat** is written at once: the Event gets
  ``series: {count: 2, lastObservedTime}`` (a JSON merge PATCH; a create if
  the Event is gone);
- further repeats only bump the local ``series.count`` and
  ``lastObservedTime``; every ``refresh_time`` (30 min) all ongoing series
  are written;
- every ``finish_time`` (6 min) series not observed for ``finish_time`` are
  written one last time and forgotten; single events older than that are
  forgotten.

So a hot loop emitting the same event costs two writes and then one per 30
minutes, instead of one per event (or per token of the spam filter).
Queueing is as :class:`~k8py.client.event_recorder.EventBroadcaster`: bounded,
non-blocking, dropped when full (a warning per 1,000 drops); ``run`` is the only writer.

Writes wait in order, never in the queue: as upstream's ``recordToSink``
writes each event on its own goroutine, ``run`` drains the queue as fast as
events come into a list of pending writes, so a busy or rate-limited API
server slows the writes, not the recording, and nothing is dropped while they
wait (a cap on writes in flight had made the queue fill and drop 10-37 % of a
scheduler's ``Scheduled`` Events while it bound pods as fast as the API server
took them). A dispatcher starts each pending write, in order, once it has its
token from the ``limiter`` (a token bucket: upstream's event clientset has the
component's client QPS and burst, so a burst of events costs the API server
at most that rate) and, with ``max_in_flight``, a slot; each write is then its
own task. A pending write is its event alone (no task waits for it): at
kube-scheduler's default 50 a second, a scheduler that placed 10,000 pods in
half a minute holds some 8,000 of them for three minutes, as upstream holds
8,000 goroutines (past ``max_pending`` waiting, an event is dropped, as
when the queue is full). Writes of one isomorphic event stay in order (a
series PATCH waits for the create before it). :meth:`flush` waits for the
queued, the pending and the in-flight writes.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections import deque
from typing import Any, Mapping

from k8py.api.errors import NotFound, StatusError
from k8py.client.clock import Clock, RealClock
from k8py.client.event_correlator import event_name
from k8py.client.event_recorder import MAX_QUEUED_EVENTS, NORMAL, WARNING, object_reference
from k8py.client.lease_lock import micro_time, parse_micro_time
from k8py.client.rate_limiters import BucketRateLimiter
from k8py.client.resource import Resource
from k8py.client.resources import EVENTS
from k8py.client.rest import PatchType, RestClient

__all__ = ["SeriesEventBroadcaster", "SeriesEventRecorder"]

logger = logging.getLogger(__name__)

FINISH_TIME = 6 * 60.0
REFRESH_TIME = 30 * 60.0
MAX_NOTE_LENGTH = 1024
#: writes waiting for their turn beyond which an event is dropped (some 110 MB of them): a bound
#: upstream's goroutine per event does not have, for a component that records faster than its
#: rate for long (a scheduler placing 100 pods a second against 50 Events a second for 15 minutes)
MAX_PENDING_WRITES = 50_000

Event = dict[str, Any]


def _ref_key(ref: Mapping[str, Any] | None) -> tuple[str, ...]:
    ref = ref or {}
    return tuple(ref.get(f) or "" for f in ("kind", "apiVersion", "namespace", "name", "uid", "fieldPath"))


def isomorphic_key(event: Event) -> tuple[Any, ...]:
    return (event.get("action"), event.get("reason"), event.get("reportingController"),
            _ref_key(event.get("regarding")), _ref_key(event.get("related")))


class SeriesEventRecorder:
    def __init__(self, broadcaster: SeriesEventBroadcaster, *, reporting_controller: str, reporting_instance: str) -> None:
        self._broadcaster = broadcaster
        self.reporting_controller = reporting_controller
        self.reporting_instance = reporting_instance

    def eventf(
        self, regarding: Mapping[str, Any], related: Mapping[str, Any] | None, event_type: str, reason: str, action: str,
        note: str, *args: Any, resource: Resource | None = None,
    ) -> None:
        if event_type not in (NORMAL, WARNING):
            logger.error("unsupported event type", extra={"type": event_type, "reason": reason})
            return
        if self._broadcaster.is_full():
            # it would be dropped on arrival: not built (a scheduler binding 700 pods/s
            # past a 50/s write rate emits all but a few of its Events into a full queue)
            self._broadcaster.drop(reason)
            return
        try:
            ref = object_reference(regarding, resource=resource)
            related_ref = object_reference(related) if related is not None else None
        except ValueError as err:
            logger.error("could not construct reference, will not report event", extra={"reason": reason, "error": str(err)})
            return
        now = self._broadcaster.clock.now()
        event: Event = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": event_name(ref["name"], now), "namespace": ref.get("namespace") or "default"},
            "eventTime": micro_time(now),
            "reportingController": self.reporting_controller,
            "reportingInstance": self.reporting_instance,
            "action": action,
            "reason": reason,
            "note": (note % args if args else note)[:MAX_NOTE_LENGTH],
            "type": event_type,
            "regarding": ref,
        }
        if related_ref:
            event["related"] = related_ref
        self._broadcaster.enqueue(event)


class SeriesEventBroadcaster:
    """See the module docstring."""

    def __init__(
        self, client: RestClient, *, clock: Clock | None = None, queue_size: int = MAX_QUEUED_EVENTS,
        finish_time: float = FINISH_TIME, refresh_time: float = REFRESH_TIME,
        limiter: BucketRateLimiter | None = None, max_in_flight: int | None = None,
        max_pending: int = MAX_PENDING_WRITES,
    ) -> None:
        if max_in_flight is not None and max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        self.client = client
        self.max_in_flight = max_in_flight
        self.max_pending = max_pending
        #: isomorphic key -> the last write of that event still in flight (writes of one event stay in order)
        self._writing: dict[tuple[Any, ...], asyncio.Task[None]] = {}
        self.clock: Clock = clock if clock is not None else RealClock()
        self.limiter = limiter
        self.finish_time = finish_time
        self.refresh_time = refresh_time
        self._queue: asyncio.Queue[Event] = asyncio.Queue(maxsize=queue_size)
        #: writes waiting for their token (or a slot), in order: ``run`` moves every event here at
        #: once, so a slow or rate-limited API server never fills the queue
        self._pending: deque[tuple[tuple[Any, ...], Event]] = deque()
        self._has_pending = asyncio.Event()
        self._cache: dict[tuple[Any, ...], Event] = {}
        self.dropped = 0
        self.writes = 0

    def new_recorder(self, reporting_controller: str, *, reporting_instance: str) -> SeriesEventRecorder:
        return SeriesEventRecorder(self, reporting_controller=reporting_controller, reporting_instance=reporting_instance)

    def enqueue(self, event: Event) -> bool:
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            self.drop(event.get("reason"))
            return False
        return True

    def is_full(self) -> bool:
        """Whether an event enqueued now would be dropped."""
        return self._queue.full()

    def drop(self, reason: str | None) -> None:
        """Count an event dropped for want of room in the queue."""
        self.dropped += 1
        # one warning per 1000 drops: a flood of drops must not become a flood of logs
        # (formatting a warning per event cost the scheduler more than scoring the pod)
        if self.dropped % 1000 == 1:
            logger.warning("dropping event: too many queued events", extra={"reason": reason, "dropped": self.dropped})

    async def flush(self) -> None:
        await self._queue.join()

    async def run(self) -> None:
        """Write events, refresh and finish series, until cancelled."""
        async with asyncio.TaskGroup() as group:
            group.create_task(self._every(self.refresh_time, self.refresh_series), name="event-series-refresh")
            group.create_task(self._every(self.finish_time, self.finish_series), name="event-series-finish")
            group.create_task(self._dispatch(group), name="event-series-dispatch")
            while True:
                event = await self._queue.get()
                handed_over = False
                try:
                    key = isomorphic_key(event)
                    to_write = self._observe(key, event)
                    if to_write is not None and len(self._pending) >= self.max_pending:
                        self.drop(event.get("reason"))
                    elif to_write is not None:
                        self._pending.append((key, to_write))
                        self._has_pending.set()
                        handed_over = True
                finally:
                    if not handed_over:
                        self._queue.task_done()

    async def _dispatch(self, group: asyncio.TaskGroup) -> None:
        """Start the pending writes in order, each once it has its token (and a slot)."""
        slots = asyncio.Semaphore(self.max_in_flight) if self.max_in_flight is not None else None
        while True:
            while not self._pending:
                self._has_pending.clear()
                await self._has_pending.wait()
            key, event = self._pending.popleft()
            await self._wait_for_token()
            if slots is not None:
                await slots.acquire()
            prior = self._writing.get(key)
            task = group.create_task(self._write_in_order(event, prior, slots), name="event-write")
            self._writing[key] = task
            task.add_done_callback(lambda t, k=key: self._writing.pop(k) if self._writing.get(k) is t else None)

    async def _write_in_order(self, event: Event, prior: asyncio.Task[None] | None, slots: asyncio.Semaphore | None) -> None:
        try:
            if prior is not None:
                await asyncio.wait((prior,))
            await self._send(event)
        finally:
            if slots is not None:
                slots.release()
            self._queue.task_done()

    def _observe(self, key: tuple[Any, ...], event: Event) -> Event | None:
        """The event to write for ``event`` (None: counted in its series only).

        What is written is a copy of the cached event's top level (and of its
        series): later repeats change the cached one, never what a write in
        flight sends. Nothing else in an event is changed once built."""
        cached = self._cache.get(key)
        if cached is None:
            self._cache[key] = event
            return {**event}
        observed = micro_time(self.clock.now())
        if "series" in cached:
            cached["series"]["count"] += 1
            cached["series"]["lastObservedTime"] = observed
            return None
        cached["series"] = {"count": 2, "lastObservedTime": observed}
        return {**cached, "series": dict(cached["series"])}

    async def refresh_series(self) -> None:
        for event in [e for e in self._cache.values() if "series" in e]:
            await self._write(copy.deepcopy(event))

    async def finish_series(self) -> None:
        now = self.clock.now()
        for key, event in list(self._cache.items()):
            series = event.get("series")
            seen = parse_micro_time(series["lastObservedTime"] if series else event["eventTime"])
            if seen is not None and (now - seen).total_seconds() > self.finish_time:
                del self._cache[key]
                if series:
                    await self._write(copy.deepcopy(event))

    async def _every(self, period: float, action: Any) -> None:
        while True:
            await self.clock.sleep(period)
            await action()

    async def _wait_for_token(self) -> None:
        if self.limiter is not None:
            delay = self.limiter.when(None)
            if delay > 0:
                await self.clock.sleep(delay)

    async def _write(self, event: Event) -> None:
        """One write, after a token (the refresh and finish passes)."""
        await self._wait_for_token()
        await self._send(event)

    async def _send(self, event: Event) -> None:
        meta = event["metadata"]
        try:
            if "series" in event:
                try:
                    await self.client.patch(EVENTS, meta["namespace"], meta["name"], {"series": event["series"]},
                                            patch_type=PatchType.MERGE)
                    self.writes += 1
                    return
                except NotFound:
                    pass
            await self.client.create(EVENTS, event, namespace=meta["namespace"])
            self.writes += 1
        except StatusError as err:
            logger.error("server rejected event (will not retry)", extra={"reason": event.get("reason"), "error": str(err)})
        except Exception as err:  # noqa: BLE001 - best effort; the next refresh writes the series again
            logger.error("unable to write event", extra={"reason": event.get("reason"), "error": repr(err)})
