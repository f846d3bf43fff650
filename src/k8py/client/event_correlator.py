"""EventCorrelator: what to do with a core/v1 Event before it is written
(client-go ``tools/record/events_cache.go``).

Components emit the same events over and over (a pod that cannot be
scheduled, a sync that keeps failing). Writing each one would flood etcd and
``kubectl describe``, so every event passes three stages, in upstream's order:

1. **aggregate** (:class:`EventAggregator`): events that are *similar* — same
   source, involved object, type and reason (and reporting controller and
   instance) — but carry different messages are counted per similarity key.
   Once ``max_events`` (10) distinct messages have been seen within
   ``max_interval`` (600 s, measured from the last similar event, so the
   window slides), the event is replaced by one whose message is
   ``"(combined from similar events): <message>"``, keyed by the similarity
   key, so later ones all fold into that single Event.
2. **deduplicate** (:class:`EventLogger`): an event with the same key as one
   already written (for plain events, the same source, object, type, reason
   and message) becomes a PATCH of the existing Event: same name and
   ``firstTimestamp``, ``count`` one higher, new ``lastTimestamp`` and
   message. The patch is ``{"count", "lastTimestamp", "message"}``: the fields
   of upstream's two-way strategic merge patch.
3. **spam filter** (:class:`SpamFilter`): one token bucket per source and
   involved object (not per reason): ``burst`` 25 events, then one every
   ``1/qps`` = 300 s. An event without a token is skipped (not queued).

A flood (a ReplicaSet creating 10,000 pods records 10,000 SuccessfulCreate
events) is mostly events already combined and out of spam tokens: for those
:meth:`EventCorrelator.correlate` makes the three stages' changes to their
state directly and skips the event, without building the combined event and
its repeat first (same decisions, same counts: a later patch's ``count``
still includes every skipped repeat, as upstream's does).

Every cache is an LRU of ``lru_cache_size`` (4096) entries, so memory is
bounded however many objects a component touches. The correlator is pure
(no I/O) and single-task: the broadcaster's writer calls it; the caller of
``recorder.event`` never does. Wall time (timestamps written into Events)
comes from ``clock.now()``, intervals and token refill from
``clock.monotonic()``.
"""

from __future__ import annotations

import functools
import math
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Generic, Hashable, TypeVar

from k8py.client.clock import Clock, RealClock

__all__ = [
    "CorrelatorOptions",
    "CorrelateResult",
    "EventCorrelator",
    "EventAggregator",
    "EventLogger",
    "SpamFilter",
    "TokenBucket",
    "event_key",
    "spam_key",
    "aggregate_key",
    "combined_message",
    "event_name",
    "rfc3339",
]

Event = dict[str, Any]
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

COMBINED_PREFIX = "(combined from similar events): "


def rfc3339(when: datetime) -> str:
    """A metav1.Time string (whole seconds): ``2026-11-30T08:00:00Z``."""
    # formatted once per second: a controller creating a thousand pods a
    # second records an event for each, and strftime was a tenth of that cost
    return _rfc3339_second(math.floor(when.timestamp()))


@functools.lru_cache(maxsize=8)
def _rfc3339_second(second: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))


def event_name(object_name: str, when: datetime) -> str:
    """``<object name>.<hex unix nanoseconds>``, as upstream names Events."""
    delta = when - datetime(1970, 1, 1, tzinfo=timezone.utc)
    nanos = (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000
    return f"{object_name}.{nanos:x}"


def _source(event: Event) -> tuple[str, str]:
    source = event.get("source") or {}
    return source.get("component") or "", source.get("host") or ""


def _involved(event: Event) -> tuple[str, ...]:
    ref = event.get("involvedObject") or {}
    return tuple(ref.get(f) or "" for f in ("kind", "namespace", "name", "uid", "apiVersion"))


def spam_key(event: Event) -> str:
    """Source and involved object: one spam bucket per emitter per object."""
    return "".join((*_source(event), *_involved(event)))


def aggregate_key(event: Event) -> tuple[str, str]:
    """(similarity key, local key): similar events differ only in their message."""
    key = "".join((
        *_source(event), *_involved(event), event.get("type") or "", event.get("reason") or "",
        event.get("reportingComponent") or "", event.get("reportingInstance") or "",
    ))
    return key, event.get("message") or ""


def event_key(event: Event) -> str:
    """Everything that makes two events identical (dedup key)."""
    ref = event.get("involvedObject") or {}
    return "".join((
        *_source(event), ref.get("kind") or "", ref.get("namespace") or "", ref.get("name") or "",
        ref.get("fieldPath") or "", ref.get("uid") or "", ref.get("apiVersion") or "",
        event.get("type") or "", event.get("reason") or "", event.get("message") or "",
    ))


def combined_message(event: Event) -> str:
    return COMBINED_PREFIX + (event.get("message") or "")


class LRU(Generic[K, V]):
    """A dict that forgets its least recently used entry beyond ``size``."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._data: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._data.get(key)
        if value is not None:
            self._data.move_to_end(key)
        return value

    def peek(self, key: K) -> V | None:
        """The value without marking it used."""
        return self._data.get(key)

    def add(self, key: K, value: V) -> None:
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self.size:
            self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)


@dataclass(frozen=True, slots=True)
class CorrelatorOptions:
    """client-go's ``CorrelatorOptions`` defaults."""

    lru_cache_size: int = 4096
    burst_size: int = 25
    qps: float = 1.0 / 300.0
    max_events: int = 10
    max_interval: float = 600.0
    key_func: Callable[[Event], tuple[str, str]] = aggregate_key
    message_func: Callable[[Event], str] = combined_message
    spam_key_func: Callable[[Event], str] = spam_key


class TokenBucket:
    """A passive token bucket: ``try_accept`` takes a token if one is there."""

    def __init__(self, qps: float, burst: int, now: float) -> None:
        self.qps = qps
        self.burst = burst
        self.tokens = float(burst)
        self.last = now

    def would_accept(self, now: float) -> bool:
        """Whether :meth:`try_accept` would take a token now (changes nothing)."""
        return min(float(self.burst), self.tokens + (now - self.last) * self.qps) >= 1.0

    def try_accept(self, now: float) -> bool:
        self.tokens = min(float(self.burst), self.tokens + (now - self.last) * self.qps)
        self.last = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


class SpamFilter:
    """``filter(event)`` is true when the event's source+object bucket is empty."""

    def __init__(self, options: CorrelatorOptions, clock: Clock) -> None:
        self._options = options
        self._clock = clock
        self._buckets: LRU[str, TokenBucket] = LRU(options.lru_cache_size)

    def filter(self, event: Event) -> bool:
        key = self._options.spam_key_func(event)
        now = self._clock.monotonic()
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = TokenBucket(self._options.qps, self._options.burst_size, now)
        self._buckets.add(key, bucket)
        return not bucket.try_accept(now)

    def would_filter(self, key: str, now: float) -> bool:
        """Whether :meth:`filter` would skip an event of spam key ``key`` now (changes nothing)."""
        bucket = self._buckets.peek(key)
        return bucket is not None and not bucket.would_accept(now)


@dataclass(slots=True)
class _AggregateRecord:
    local_keys: set[str] = field(default_factory=set)
    last_seen: float = float("-inf")


class EventAggregator:
    """Stage 1; see the module docstring."""

    def __init__(self, options: CorrelatorOptions, clock: Clock) -> None:
        self._options = options
        self._clock = clock
        self._records: LRU[str, _AggregateRecord] = LRU(options.lru_cache_size)

    def aggregate(self, event: Event) -> tuple[Event, str]:
        """The event to go on with (the same or a combined one) and its dedup key."""
        key, local_key = self._options.key_func(event)
        if not self._see(key, local_key, self._clock.monotonic()):
            return event, event_key(event)
        return self._combined(event), key

    def combined_key(self, event: Event, now: float) -> tuple[str, str] | None:
        """(similarity key, local key) if :meth:`aggregate` would combine ``event`` now
        (changes nothing), else None."""
        key, local_key = self._options.key_func(event)
        record = self._records.peek(key)
        if record is None or now - record.last_seen > self._options.max_interval:
            return None
        if len(record.local_keys) + (local_key not in record.local_keys) < self._options.max_events:
            return None
        return key, local_key

    def see_combined(self, key: str, local_key: str, now: float) -> None:
        """What :meth:`aggregate` records of an event :meth:`combined_key` said it would combine."""
        self._see(key, local_key, now)

    def _see(self, key: str, local_key: str, now: float) -> bool:
        """Record one event of ``key``; whether it is to be combined."""
        record = self._records.get(key)
        if record is None or now - record.last_seen > self._options.max_interval:
            record = _AggregateRecord()
        record.local_keys.add(local_key)
        record.last_seen = now
        self._records.add(key, record)
        if len(record.local_keys) < self._options.max_events:
            return False
        record.local_keys.pop()  # do not grow the set beyond the threshold
        return True

    def _combined(self, event: Event) -> Event:
        wall = self._clock.now()
        stamp = rfc3339(wall)
        ref = event.get("involvedObject") or {}
        combined: Event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": event_name(ref.get("name") or "", wall), "namespace": (event.get("metadata") or {}).get("namespace")},
            "involvedObject": ref,
            "type": event.get("type"),
            "reason": event.get("reason"),
            "message": self._options.message_func(event),
            "source": event.get("source") or {},
            "count": 1,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
        }
        return combined


@dataclass(frozen=True, slots=True)
class _Observation:
    count: int
    first_timestamp: str | None
    name: str
    resource_version: str


class EventLogger:
    """Stage 2: remembers what was written under each key; see the module docstring."""

    def __init__(self, options: CorrelatorOptions) -> None:
        self._seen: LRU[str, _Observation] = LRU(options.lru_cache_size)

    def observe(self, event: Event, key: str) -> tuple[Event, dict[str, Any] | None]:
        """The event to write and, if it repeats a written one, the patch for it."""
        # only the top level and metadata change below; the nested parts
        # (involvedObject, source) are never written to, so they are shared
        event = {**event, "metadata": dict(event.get("metadata") or {})}
        meta = event["metadata"]
        last = self._seen.get(key)
        patch = None
        if last is not None and last.count > 0:
            meta["name"] = last.name
            meta["resourceVersion"] = last.resource_version
            event["firstTimestamp"] = last.first_timestamp
            event["count"] = last.count + 1
            patch = {"count": event["count"], "lastTimestamp": event.get("lastTimestamp"), "message": event.get("message")}
        self._record(key, event)
        return event, patch

    def written(self, key: str) -> bool:
        """Whether an Event of ``key`` was written (so :meth:`observe` would make a repeat of it)."""
        last = self._seen.peek(key)
        return last is not None and last.count > 0

    def count_repeat(self, key: str) -> None:
        """What :meth:`observe` records of a repeat of a written Event (see :meth:`written`)."""
        last = self._seen.get(key)
        assert last is not None and last.count > 0, "count_repeat of an Event never written"
        self._seen.add(key, _Observation(last.count + 1, last.first_timestamp, last.name, last.resource_version))

    def update_state(self, written: Event, key: str) -> None:
        """Remember the Event as the server returned it (its resourceVersion, count)."""
        self._record(key, written)

    def _record(self, key: str, event: Event) -> None:
        meta = event.get("metadata") or {}
        self._seen.add(key, _Observation(
            count=int(event.get("count") or 0), first_timestamp=event.get("firstTimestamp"),
            name=meta.get("name") or "", resource_version=meta.get("resourceVersion") or "",
        ))


@dataclass(frozen=True, slots=True)
class CorrelateResult:
    event: Event | None
    patch: dict[str, Any] | None = None
    key: str = ""
    skip: bool = False


class EventCorrelator:
    """The three stages in order; ``correlate`` then, once written, ``update_state``.

    ``flood_shortcut=False`` takes every event through the three stages (what the
    shortcut for a flood, in the module docstring, is tested against)."""

    def __init__(self, options: CorrelatorOptions | None = None, *, clock: Clock | None = None,
                 flood_shortcut: bool = True) -> None:
        self.options = options if options is not None else CorrelatorOptions()
        self._clock = clock if clock is not None else RealClock()
        self.aggregator = EventAggregator(self.options, self._clock)
        self.logger = EventLogger(self.options)
        self.spam_filter = SpamFilter(self.options, self._clock)
        # the shortcut files the event in the spam bucket of the combined event it stands for:
        # the same bucket under the default key (source and object), not under any key
        self.flood_shortcut = flood_shortcut and self.options.spam_key_func is spam_key

    def correlate(self, event: Event) -> CorrelateResult:
        if self.flood_shortcut:
            skipped = self._skip_flood(event)
            if skipped is not None:
                return skipped
        aggregated, key = self.aggregator.aggregate(event)
        observed, patch = self.logger.observe(aggregated, key)
        if self.spam_filter.filter(observed):
            return CorrelateResult(None, skip=True, key=key)
        return CorrelateResult(observed, patch, key)

    def _skip_flood(self, event: Event) -> CorrelateResult | None:
        """An event the stages would combine into an Event already written and then
        filter as spam: each stage records it as it would, and nothing is built.
        ``None`` (nothing changed): not that case, take the three stages."""
        now = self._clock.monotonic()
        combined = self.aggregator.combined_key(event, now)
        if combined is None:
            return None
        key, local_key = combined
        if not self.logger.written(key) or not self.spam_filter.would_filter(self.options.spam_key_func(event), now):
            return None
        self.aggregator.see_combined(key, local_key, now)
        self.logger.count_repeat(key)
        skipped = self.spam_filter.filter(event)
        assert skipped, "the spam bucket was found empty"
        return CorrelateResult(None, skip=True, key=key)

    def update_state(self, written: Event, key: str) -> None:
        self.logger.update_state(written, key)
