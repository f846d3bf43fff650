"""A watch's wire lines: each event the cache holds as object bytes, framed for one watcher.

Every watch event is ``{"type":"<TYPE>","object":<object>}`` and a newline
(``serve_watch`` adds the chunk framing). The object bytes are the cache's,
encoded once for all watchers, so a plain JSON watch only adds the short type
prefix and suffix around them; watchers whose encoders give the same bytes
for the same events (equal :attr:`WatchEncoder.share_key`) share one frame.
A Table watch (``kubectl get -w``) turns each object into a one-row Table, its
column definitions in the first frame only; a resource served in another
version than it is stored in is converted first, on the watch's own task when
the conversion does I/O (a conversion webhook).
"""

from __future__ import annotations

from typing import Any, Callable

import orjson

from k8py.api.errors import StatusError
from k8py.apiserver.handlers.codec import ResponseFormat
from k8py.apiserver.registry import ResourceDefinition, to_served

__all__ = ["WatchEncoder", "error_line"]

_PREFIX = {t: b'{"type":"' + t.encode() + b'","object":' for t in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR")}
_SUFFIX = b"}\n"
_SHARED = object()  # marks the share keys of plain JSON encoders


class WatchEncoder:
    """Turns queued (type, object bytes) into wire bytes for one watcher."""

    def __init__(self, definition: ResourceDefinition, fmt: ResponseFormat, table: Callable[..., dict] | None,
                 on_sent: Callable[[list[tuple[str, bytes]]], None] | None = None) -> None:
        self.definition = definition
        self.fmt = fmt
        self.table = table
        self.first_table = True
        #: told of every batch of events about to be written (the flow recorder)
        self.on_sent = on_sent
        #: the converter does I/O (a conversion webhook): events are converted
        #: by :meth:`convert` on the watch's own task, never in the cacher's sink
        self.slow = bool(getattr(definition.converter, "is_async", False))

    async def convert(self, events: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
        """The object events of a batch in the served version, in one call."""
        if not self.slow:
            return events
        at = [i for i, (t, _) in enumerate(events) if t in ("ADDED", "MODIFIED", "DELETED")]
        served = await to_served(self.definition, [orjson.loads(events[i][1]) for i in at])
        out = list(events)
        for i, obj in zip(at, served):
            out[i] = (events[i][0], orjson.dumps(obj))
        return out

    @property
    def share_key(self) -> Any:
        """Equal for encoders that turn the same events into the same bytes
        (None: this one's output is its own, e.g. a Table watch numbers its
        first frame apart). Watchers with equal keys owed the same events in
        one flush write one shared frame."""
        if self.fmt.kind == "table" or self.slow:
            return None
        return (_SHARED, self.definition.converter)

    def lines(self, events: list[tuple[str, bytes]]) -> bytes:
        if self.on_sent is not None:
            self.on_sent(events)
        return self.encode(events)

    def encode(self, events: list[tuple[str, bytes]]) -> bytes:
        """The wire lines of ``events`` (no chunk framing)."""
        converter = self.definition.converter
        if converter is not None and not self.slow:  # a view of another kind's stored form
            events = [(t, orjson.dumps(converter.from_storage(orjson.loads(d)))) for t, d in events]
        if self.fmt.kind != "table" or self.table is None:
            parts: list[bytes] = []
            for type_, data in events:
                parts.append(_PREFIX[type_])
                parts.append(data)
                parts.append(_SUFFIX)
            return b"".join(parts)
        out = []
        for type_, data in events:
            table = self.table(
                self.definition.group,
                self.definition.kind,
                [orjson.loads(data)],
                list_meta=None,
                include_object=self.fmt.include_object,
                printer=self.definition.printer,
            )
            if not self.first_table:
                table["columnDefinitions"] = None
            self.first_table = False
            out.append(orjson.dumps({"type": type_, "object": table}) + b"\n")
        return b"".join(out)

    def bookmark(self, rv: int, *, initial_events_end: bool = False) -> bytes:
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if initial_events_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        obj = {"kind": self.definition.kind, "apiVersion": self.definition.api_version, "metadata": meta}
        return _PREFIX["BOOKMARK"] + orjson.dumps(obj) + _SUFFIX


def error_line(err: StatusError) -> bytes:
    """An ERROR event carrying ``err``'s Status (a watch that cannot go on says why, then ends)."""
    return _PREFIX["ERROR"] + orjson.dumps(err.to_dict()) + _SUFFIX
