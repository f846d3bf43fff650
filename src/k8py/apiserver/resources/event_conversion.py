"""events.k8s.io/v1 Events as a view of the core/v1 Events in the store.

Upstream keeps one Event type and serves it in both API versions; an Event
written through either is listed through both (``kubectl describe`` reads
core/v1). k8py stores the core/v1 form and converts the events.k8s.io/v1 view
on the way in and out. Field mapping (upstream's conversion functions):

=================================  ======================================
events.k8s.io/v1                   core/v1
=================================  ======================================
regarding                          involvedObject
note                               message
reportingController                reportingComponent
deprecatedSource                   source
deprecatedFirstTimestamp           firstTimestamp
deprecatedLastTimestamp            lastTimestamp
deprecatedCount                    count
(same name) reason, type, action, related, reportingInstance,
eventTime, series, metadata
=================================  ======================================

One difference from upstream: a core/v1 Event without ``eventTime`` gets one
in the events.k8s.io view, from its first timestamp, because clients of that
version treat the field as required.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

__all__ = ["EventsV1Converter"]

Object = dict[str, Any]

_RENAMES = (
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
)
_TO_CORE = dict(_RENAMES)
_FROM_CORE = {core: v1 for v1, core in _RENAMES}


class EventsV1Converter:
    """Converts between the events.k8s.io/v1 view and the stored core/v1 form."""

    #: events.k8s.io field selectors, in terms of the stored form's fields
    field_aliases = {
        "regarding.kind": "involvedObject.kind",
        "regarding.name": "involvedObject.name",
        "regarding.namespace": "involvedObject.namespace",
        "regarding.uid": "involvedObject.uid",
        "reportingController": "reportingComponent",
    }

    def to_storage(self, obj: Object) -> Object:
        out: Object = {"kind": "Event", "apiVersion": "v1"}
        for key, value in obj.items():
            if key in ("kind", "apiVersion"):
                continue
            out[_TO_CORE.get(key, key)] = value
        return out

    def from_storage(self, obj: Object) -> Object:
        out: Object = {"kind": "Event", "apiVersion": "events.k8s.io/v1"}
        for key, value in obj.items():
            if key in ("kind", "apiVersion"):
                continue
            out[_FROM_CORE.get(key, key)] = value
        if not out.get("eventTime"):
            # events.k8s.io/v1 requires eventTime (clients model it as
            # required); an Event written through core/v1 may lack it, so
            # it is derived from the first timestamp (with microseconds)
            first = out.get("deprecatedFirstTimestamp") or (out.get("metadata") or {}).get("creationTimestamp")
            micro = _micro_time(first)
            if micro:
                out["eventTime"] = micro
        return out


def _micro_time(value: Any) -> str | None:
    """An RFC 3339 time as a MicroTime (``2026-11-30T08:00:00.000000Z``)."""
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
