"""EventRecorder and EventBroadcaster: Kubernetes Events from a component
(client-go ``tools/record``).

What a user should see about an object becomes a core/v1 Event on it, shown by
``kubectl describe``::

    broadcaster = EventBroadcaster(client)
    recorder = broadcaster.new_recorder("configmap-mirror", host=socket.gethostname())
    async with asyncio.TaskGroup() as tg:
        tg.create_task(broadcaster.run(), name="event-broadcaster")
        ...
        recorder.event(configmap, "Normal", "Mirrored", "mirrored to default/x-mirror")

Flow and guarantees:

- ``recorder.event`` / ``eventf`` never block and never raise for I/O: they
  build the Event (``involvedObject`` from the object's kind, apiVersion,
  namespace, name, uid and resourceVersion; ``source`` component/host;
  ``firstTimestamp`` = ``lastTimestamp`` = now; ``count`` 1; name
  ``<object name>.<hex unix nanos>``; namespace the object's, or ``default``
  for cluster-scoped objects) and put it on the broadcaster's queue.
- The queue is **bounded** (``queue_size``, 1000 as upstream's
  ``maxQueuedEvents``). When it is full the event is **dropped** — checked
  before the Event is built, so a flood of drops costs next to nothing — and
  a warning is logged ("dropping event: too many queued events", once per
  1000 drops): recording is advisory and must never stall a controller.
- :meth:`EventBroadcaster.run` is the single writer task: each event goes
  through the :class:`~k8py.client.event_correlator.EventCorrelator`
  (aggregation, dedup, spam filter), then is written: a repeat is a strategic
  merge PATCH of the existing Event (``count``, ``lastTimestamp``,
  ``message``), falling back to a create if that Event is gone (404); a new
  one is a POST. A rejected write (any API error status) is not retried; a
  transport failure is retried up to ``max_tries`` (12) times,
  ``retry_sleep`` (10 s) apart, the first wait randomized, as upstream.
- Events must be recorded from the broadcaster's event loop (``event`` is a
  plain method, not thread-safe).
- :meth:`EventBroadcaster.flush` waits until everything queued so far has
  been handled (written, skipped or given up).
- Only ``Normal`` and ``Warning`` types are accepted; others are logged and
  dropped, as upstream.
- With ``log_events=True`` every recorded event is also logged at INFO
  (client-go's ``StartLogging``).
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Any, Callable, Mapping, Protocol

from k8py.api.errors import NotFound, StatusError
from k8py.client.clock import Clock, RealClock
from k8py.client.event_correlator import CorrelatorOptions, EventCorrelator, event_name, rfc3339
from k8py.client.resource import Resource
from k8py.client.resources import CORE_EVENTS
from k8py.client.rest import PatchType, RestClient

__all__ = [
    "EventBroadcaster",
    "EventRecorder",
    "EventSink",
    "CoreEventSink",
    "object_reference",
    "NORMAL",
    "WARNING",
]

logger = logging.getLogger(__name__)

NORMAL = "Normal"
WARNING = "Warning"
MAX_QUEUED_EVENTS = 1000
MAX_TRIES_PER_EVENT = 12
DEFAULT_RETRY_SLEEP = 10.0

Event = dict[str, Any]


def object_reference(obj: Mapping[str, Any], *, resource: Resource | None = None) -> dict[str, Any]:
    """An ObjectReference for ``obj`` (a full object, or already a reference).

    Objects from a list or an informer may lack ``kind``/``apiVersion``;
    pass the ``resource`` they came from to fill them in.
    """
    if "metadata" not in obj and "name" in obj:  # already a reference
        return {k: v for k, v in obj.items() if v}
    meta = obj.get("metadata") or {}
    ref = {
        "kind": obj.get("kind") or (resource.kind if resource else ""),
        "apiVersion": obj.get("apiVersion") or (resource.api_version if resource else ""),
        "namespace": meta.get("namespace") or "",
        "name": meta.get("name") or "",
        "uid": meta.get("uid") or "",
        "resourceVersion": meta.get("resourceVersion") or "",
    }
    if not ref["kind"] or not ref["name"]:
        raise ValueError("cannot build a reference: the object has no kind or no name")
    return {k: v for k, v in ref.items() if v}


class EventSink(Protocol):
    """Where events are written (client-go ``EventSink``)."""

    async def create(self, event: Event) -> Event: ...

    async def patch(self, event: Event, patch: Mapping[str, Any]) -> Event: ...


class CoreEventSink:
    """core/v1 Events through the REST client."""

    def __init__(self, client: RestClient) -> None:
        self.client = client

    async def create(self, event: Event) -> Event:
        return await self.client.create(CORE_EVENTS, event, namespace=event["metadata"]["namespace"])

    async def patch(self, event: Event, patch: Mapping[str, Any]) -> Event:
        meta = event["metadata"]
        return await self.client.patch(CORE_EVENTS, meta["namespace"], meta["name"], patch, patch_type=PatchType.STRATEGIC)


class EventRecorder:
    """Records events for one source (component, host); see the module docstring."""

    def __init__(self, broadcaster: EventBroadcaster, *, component: str, host: str = "") -> None:
        self._broadcaster = broadcaster
        self.source = {"component": component, **({"host": host} if host else {})}

    def event(self, obj: Mapping[str, Any], event_type: str, reason: str, message: str, *, resource: Resource | None = None) -> None:
        self._generate(obj, None, event_type, reason, message, resource)

    def eventf(self, obj: Mapping[str, Any], event_type: str, reason: str, fmt: str, *args: Any, resource: Resource | None = None) -> None:
        self._generate(obj, None, event_type, reason, fmt % args if args else fmt, resource)

    def annotated_eventf(
        self, obj: Mapping[str, Any], annotations: Mapping[str, str], event_type: str, reason: str, fmt: str, *args: Any,
        resource: Resource | None = None,
    ) -> None:
        self._generate(obj, annotations, event_type, reason, fmt % args if args else fmt, resource)

    def _generate(
        self, obj: Mapping[str, Any], annotations: Mapping[str, str] | None, event_type: str, reason: str, message: str,
        resource: Resource | None,
    ) -> None:
        if self._broadcaster.full():
            self._broadcaster.drop(reason)  # before building it: a flood of drops must stay cheap
            return
        try:
            ref = object_reference(obj, resource=resource)
        except ValueError as err:
            logger.error("could not construct reference, will not report event",
                         extra={"reason": reason, "error": str(err)})
            return
        if event_type not in (NORMAL, WARNING):
            logger.error("unsupported event type", extra={"type": event_type, "reason": reason})
            return
        now = self._broadcaster.clock.now()
        stamp = rfc3339(now)
        meta: dict[str, Any] = {"name": event_name(ref["name"], now), "namespace": ref.get("namespace") or "default"}
        if annotations:
            meta["annotations"] = dict(annotations)
        event: Event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": meta,
            "involvedObject": ref,
            "reason": reason,
            "message": message,
            "type": event_type,
            "source": dict(self.source),
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
            "reportingComponent": self.source["component"],
            "reportingInstance": self.source.get("host", ""),
        }
        self._broadcaster.enqueue(event)


class EventBroadcaster:
    """Queues events from its recorders and writes them; see the module docstring."""

    def __init__(
        self,
        client: RestClient | None = None,
        *,
        sink: EventSink | None = None,
        options: CorrelatorOptions | None = None,
        clock: Clock | None = None,
        queue_size: int = MAX_QUEUED_EVENTS,
        retry_sleep: float = DEFAULT_RETRY_SLEEP,
        max_tries: int = MAX_TRIES_PER_EVENT,
        log_events: bool = False,
        rng: Callable[[], float] = random.random,
    ) -> None:
        if sink is None:
            if client is None:
                raise ValueError("an EventBroadcaster needs a client or a sink")
            sink = CoreEventSink(client)
        self.sink: EventSink = sink
        self.clock: Clock = clock if clock is not None else RealClock()
        self.correlator = EventCorrelator(options, clock=self.clock)
        self.retry_sleep = retry_sleep
        self.max_tries = max_tries
        self.log_events = log_events
        self._rng = rng
        self._queue: asyncio.Queue[Event] = asyncio.Queue(maxsize=queue_size)
        self.dropped = 0
        self.written = 0

    def new_recorder(self, component: str, *, host: str = "") -> EventRecorder:
        return EventRecorder(self, component=component, host=host)

    def enqueue(self, event: Event) -> bool:
        """Queue without waiting; ``False`` (and a warning) if the queue is full."""
        if self.log_events:
            ref = event.get("involvedObject") or {}
            logger.info("event", extra={"object": f"{ref.get('kind')}/{ref.get('namespace', '')}/{ref.get('name')}",
                                        "type": event.get("type"), "reason": event.get("reason"), "message": event.get("message")})
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            self.drop(event.get("reason"), (event.get("involvedObject") or {}).get("name"))
            return False
        return True

    def full(self) -> bool:
        """Whether an event recorded now would be dropped (the queue is full)."""
        return self._queue.full()

    def drop(self, reason: Any, object_name: Any = None) -> None:
        """Count an event dropped for a full queue."""
        self.dropped += 1
        # one warning per 1000 drops: a flood of drops must not become a flood of logs
        if self.dropped % 1000 == 1:
            logger.warning("dropping event: too many queued events",
                           extra={"reason": reason, "dropped": self.dropped, "object": object_name})

    def pending(self) -> int:
        return self._queue.qsize()

    async def flush(self) -> None:
        """Wait until every event queued so far has been handled (needs :meth:`run`)."""
        await self._queue.join()

    async def run(self) -> None:
        """Write queued events until cancelled."""
        while True:
            event = await self._queue.get()
            try:
                await self._record_to_sink(event)
            finally:
                self._queue.task_done()

    async def _record_to_sink(self, event: Event) -> None:
        result = self.correlator.correlate(event)
        if result.skip or result.event is None:
            logger.debug("event skipped by the spam filter", extra={"reason": event.get("reason")})
            return
        tries = 0
        while not await self._write(result.event, result.patch, result.key):
            tries += 1
            if tries >= self.max_tries:
                logger.error("unable to write event (retry limit exceeded)", extra={"reason": event.get("reason")})
                return
            # randomize the first sleep so that clients do not all retry in step after an outage
            await self.clock.sleep(self.retry_sleep * (self._rng() if tries == 1 else 1.0))

    async def _write(self, event: Event, patch: Mapping[str, Any] | None, key: str) -> bool:
        """One attempt; ``True`` when done (written, or rejected for good)."""
        try:
            written = None
            if patch is not None:
                try:
                    written = await self.sink.patch(event, patch)
                except NotFound:
                    written = None
            if written is None:
                body = {**event, "metadata": {k: v for k, v in event["metadata"].items() if k != "resourceVersion"}}
                written = await self.sink.create(body)
        except StatusError as err:
            level = logging.DEBUG if err.reason == "AlreadyExists" else logging.ERROR
            logger.log(level, "server rejected event (will not retry)", extra={"reason": event.get("reason"), "error": str(err)})
            return True
        except Exception as err:  # noqa: BLE001 - transport failures are retried by the caller
            logger.error("unable to write event (may retry after sleeping)", extra={"reason": event.get("reason"), "error": repr(err)})
            return False
        self.correlator.update_state(written, key)
        self.written += 1
        return True
