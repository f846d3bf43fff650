"""Decoding a watch response: newline-delimited JSON into :class:`WatchEvent`.

The body is a chunked stream of ``{"type":...,"object":...}\\n`` lines, cut
from raw chunks by :mod:`k8py.api.ndjson` (linear in the size of a large
object, no line-size limit; blank keep-alive lines skipped).

An ``ERROR`` event is never yielded: it carries a ``Status`` and is raised as
the matching :class:`~k8py.api.errors.StatusError`. A 410 (reason ``Expired``
or ``Gone``) always raises :class:`~k8py.api.errors.Expired`, the signal a
reflector acts on (re-list).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, AsyncIterator, Awaitable, Callable

import orjson

from k8py.api.errors import Expired, StatusError, status_from_dict
from k8py.api.ndjson import iter_lines
from k8py.client.transport import HTTPResponse

__all__ = ["WatchEvent", "WatchStream", "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR", "iter_lines", "decode_event", "INITIAL_EVENTS_END"]

ADDED, MODIFIED, DELETED, BOOKMARK, ERROR = "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
_OBJECT_TYPES = frozenset((ADDED, MODIFIED, DELETED, BOOKMARK))


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One watch event; ``object`` is the decoded object (do not mutate it if cached)."""

    type: str
    object: dict[str, Any]

    @property
    def resource_version(self) -> str:
        return (self.object.get("metadata") or {}).get("resourceVersion") or ""

    @property
    def is_initial_events_end(self) -> bool:
        """The bookmark that closes the initial events of a streaming list."""
        if self.type != BOOKMARK:
            return False
        annotations = (self.object.get("metadata") or {}).get("annotations") or {}
        return annotations.get(INITIAL_EVENTS_END) == "true"


def decode_event(line: bytes) -> WatchEvent:
    """Parse one line; raise the Status error an ``ERROR`` event carries."""
    try:
        raw = orjson.loads(line)
    except orjson.JSONDecodeError as err:
        raise StatusError(f"malformed watch event: {line[:200]!r}", code=500, reason="InternalError") from err
    if type(raw) is dict:
        type_, obj = raw.get("type"), raw.get("object")
        if type(obj) is dict and type_ in _OBJECT_TYPES:
            return WatchEvent(type_, obj)
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
        self._response = await self._open()
        try:
            async for line in iter_lines(self._response.chunks()):
                yield decode_event(line)
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
