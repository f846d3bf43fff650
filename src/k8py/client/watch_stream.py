"""Decoding a watch response: newline-delimited JSON into :class:`WatchEvent`.

The body is a chunked stream of ``{"type":...,"object":...}\\n`` lines, cut
from raw chunks by :mod:`k8py.api.ndjson` (linear in the size of a large
object, no line-size limit; blank keep-alive lines skipped).

An ``ERROR`` event is never yielded: it carries a ``Status`` and is raised as
the matching :class:`~k8py.api.errors.StatusError`. A 410 (reason ``Expired``
or ``Gone``) always raises :class:`~k8py.api.errors.Expired`, the signal a
reflector acts on (re-list).

Cost: this is the first step of what every watching component pays per
object change (bench/informer_decode.py measures the whole path). Events are
decoded straight from the lines of one read: :meth:`WatchStream.batches`
hands out the events of each read as one list, so a consumer that takes them
in bulk (the reflector) crosses the async-iterator machinery once per read
rather than three times per event; iterating the stream event by event gives
the same events in the same order. :class:`WatchEvent` is a named tuple (made
once per event; a frozen dataclass costs twice as much to build).
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Awaitable, Callable, NamedTuple

import orjson

from k8py.api.errors import Expired, StatusError, status_from_dict
from k8py.api.ndjson import LineSplitter, iter_lines
from k8py.client.transport import HTTPResponse

__all__ = ["WatchEvent", "WatchStream", "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR", "iter_lines", "decode_event", "INITIAL_EVENTS_END"]

ADDED, MODIFIED, DELETED, BOOKMARK, ERROR = "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
_OBJECT_TYPES = frozenset((ADDED, MODIFIED, DELETED, BOOKMARK))


class WatchEvent(NamedTuple):
    """One watch event; ``object`` is the decoded object (do not mutate it if cached)."""

    type: str
    object: dict[str, Any]

    @property
    def resource_version(self) -> str:
        meta = self.object.get("metadata")
        return (meta.get("resourceVersion") or "") if type(meta) is dict else ""

    @property
    def is_initial_events_end(self) -> bool:
        """The bookmark that closes the initial events of a streaming list."""
        if self.type != BOOKMARK:
            return False
        annotations = (self.object.get("metadata") or {}).get("annotations") or {}
        return annotations.get(INITIAL_EVENTS_END) == "true"


_new_event = tuple.__new__


def decode_event(line: bytes) -> WatchEvent:
    """Parse one line; raise the Status error an ``ERROR`` event carries."""
    try:
        raw = orjson.loads(line)
    except orjson.JSONDecodeError as err:
        raise StatusError(f"malformed watch event: {line[:200]!r}", code=500, reason="InternalError") from err
    if type(raw) is dict:
        type_, obj = raw.get("type"), raw.get("object")
        if type(obj) is dict and type_ in _OBJECT_TYPES:
            return _new_event(WatchEvent, (type_, obj))  # WatchEvent(type_, obj) without its Python-level __new__
    else:
        type_ = obj = None
    if not isinstance(type_, str) or not isinstance(obj, dict):
        if isinstance(raw, dict) and raw.get("kind") == "Status":
            raise _as_error(raw)
        raise StatusError(f"malformed watch event: {line[:200]!r}", code=500, reason="InternalError")
    if type_ == ERROR:
        raise _as_error(obj)
    return WatchEvent(type_, obj)


def _as_error(status: dict[str, Any]) -> StatusError:
    err = status_from_dict(status)
    if err.code == 410 and not isinstance(err, Expired):
        return Expired(err.message, code=410, reason=err.reason or "Expired")
    return err


class WatchStream:
    """One watch request. Iterate it (``async for``) or use ``async with``.

    Ends when the server closes the stream (``timeoutSeconds``); raises the
    Status error of an ``ERROR`` event (410 → ``Expired``), a StatusError if
    the server refuses the watch, or ``TransportError`` if the stream breaks.
    The connection is released when iteration ends or :meth:`close` is called.
    """

    def __init__(self, open_stream: Callable[[], Awaitable[HTTPResponse]]) -> None:
        self._open = open_stream
        self._response: HTTPResponse | None = None
        self._events: AsyncIterator[WatchEvent] | None = None

    async def _generate(self) -> AsyncIterator[WatchEvent]:
        async for events in self.batches():
            for event in events:
                yield event

    async def batches(self) -> AsyncIterator[list[WatchEvent]]:
        """The events of each read from the connection, as one non-empty list.

        Same events, order and errors as iterating the stream; an ``ERROR``
        event raises once the events before it in its read have been handed
        out. Use one way of iterating per stream.
        """
        self._response = await self._open()
        splitter = LineSplitter()
        try:
            async for chunk in self._response.chunks():
                events = []
                for line in splitter.feed(chunk):
                    try:
                        events.append(decode_event(line))
                    except StatusError:
                        if events:
                            yield events
                        raise
                if events:
                    yield events
        finally:
            self.close()

    def __aiter__(self) -> WatchStream:
        return self

    async def __anext__(self) -> WatchEvent:
        if self._events is None:
            self._events = self._generate()
        return await self._events.__anext__()

    def close(self) -> None:
        if self._response is not None:
            self._response.close()
            self._response = None

    async def aclose(self) -> None:
        if self._events is not None:
            await self._events.aclose()  # type: ignore[attr-defined]
        self.close()

    async def __aenter__(self) -> WatchStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
