"""The Event printer: ``LAST SEEN  TYPE  REASON  OBJECT  MESSAGE`` as kubectl 1.32 shows it.

Both ``v1 Event`` and ``events.k8s.io/v1 Event`` print the same way: upstream
converts both to one internal type first, and so do we
(:func:`from_events_v1`).

Time columns follow upstream ``printEvent``:

- FIRST SEEN is ``firstTimestamp``, else ``eventTime``;
- LAST SEEN is ``series.lastObservedTime`` for a series, else
  ``lastTimestamp``, else FIRST SEEN;
- COUNT is ``series.count``, else ``count``, and 1 for singleton events (the
  new API leaves ``count`` unset).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .cells import dig
from .columns import META, Column, Object, Printer
from .durations import since

__all__ = ["EVENT", "EVENTS_V1_EVENT", "from_events_v1"]

_EVENT = "io.k8s.api.core.v1.Event"
_REF = "io.k8s.api.core.v1.ObjectReference"

COLUMNS = (
    Column("Last Seen", doc=(_EVENT, "lastTimestamp")),
    Column("Type", doc=(_EVENT, "type")),
    Column("Reason", doc=(_EVENT, "reason")),
    Column("Object", doc=(_EVENT, "involvedObject")),
    Column("Subobject", priority=1, doc=(_REF, "fieldPath")),
    Column("Source", priority=1, doc=(_EVENT, "source")),
    Column("Message", doc=(_EVENT, "message")),
    Column("First Seen", priority=1, doc=(_EVENT, "firstTimestamp")),
    Column("Count", priority=1, doc=(_EVENT, "count")),
    Column("Name", priority=1, format="name", doc=(META, "name")),
)


def _source(event: Object) -> str:
    """``formatEventSource``: ``component[, host]``, falling back to reporting fields."""
    component = dig(event, "source", "component") or event.get("reportingComponent") or ""
    host = dig(event, "source", "host") or event.get("reportingInstance") or ""
    return f"{component}, {host}" if host else component


def event_cells(event: Object, now: datetime) -> list[Any]:
    if event.get("firstTimestamp"):
        first = since(event["firstTimestamp"], now)
    else:
        first = since(event.get("eventTime"), now)
    last = since(event["lastTimestamp"], now) if event.get("lastTimestamp") else first
    series = event.get("series")
    count = int(event.get("count") or 0)
    if series is not None:
        last = since(series.get("lastObservedTime"), now)
        count = int(series.get("count") or 0)
    elif count == 0:
        count = 1
    involved = event.get("involvedObject") or {}
    kind = str(involved.get("kind", "")).lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    return [
        last,
        event.get("type", ""),
        event.get("reason", ""),
        target,
        involved.get("fieldPath", ""),
        _source(event),
        str(event.get("message", "")).strip(),
        first,
        count,
        dig(event, "metadata", "name", default=""),
    ]


def from_events_v1(event: Object) -> Object:
    """An ``events.k8s.io/v1`` Event in core/v1 shape (the fields the printer reads)."""
    return {
        "metadata": event.get("metadata") or {},
        "involvedObject": event.get("regarding") or {},
        "reason": event.get("reason", ""),
        "message": event.get("note", ""),
        "type": event.get("type", ""),
        "source": event.get("deprecatedSource") or {},
        "firstTimestamp": event.get("deprecatedFirstTimestamp"),
        "lastTimestamp": event.get("deprecatedLastTimestamp"),
        "count": event.get("deprecatedCount") or 0,
        "eventTime": event.get("eventTime"),
        "series": event.get("series"),
        "reportingComponent": event.get("reportingController", ""),
        "reportingInstance": event.get("reportingInstance", ""),
    }


EVENT = Printer(COLUMNS, event_cells)
EVENTS_V1_EVENT = Printer(COLUMNS, lambda obj, now: event_cells(from_events_v1(obj), now))
