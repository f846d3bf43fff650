"""Serving a watch: the chunked stream of JSON-line events.

Wire format (what every client depends on: client-go's StreamWatcher, the
official Python client's ``Watch``, ``kubectl get -w``; ``tests/apiserver/test_api_watch.py``
pins it): HTTP 200, chunked, one JSON object per
line ``{"type":...,"object":...}\\n``, no blank keep-alive lines. The object
bytes are the cache's, encoded once for all watchers; only the short type
prefix is added (:mod:`.watch_encoding`). Live events are written by the cacher itself, straight to
the connection, once per store batch (see ``watcher``): what a batch brings a
watcher goes out in one write, flushed at once.

Start semantics (upstream):

- no resourceVersion, or ``"0"``: synthetic ADDED events for the current
  matching objects (a consistent snapshot when unset), then live;
- ``sendInitialEvents=true`` (requires ``resourceVersionMatch=NotOlderThan``
  and ``allowWatchBookmarks=true``): the same, then a BOOKMARK annotated
  ``k8s.io/initial-events-end: "true"``;
- ``N``: every change after N from the cache's ring, then live; N older than
  the ring → 200 and one ERROR event carrying a 410 Expired Status; N newer
  than the cache → the changes after N as they come.

``allowWatchBookmarks=true`` adds a BOOKMARK every ``bookmark_interval``
seconds, written only when nothing is queued for the watcher: then every
event up to the cache's revision is on the wire or was not for this watcher,
so the bookmark's revision never runs ahead of an event still to come (a
reflector resuming from it would lose that event). ``timeoutSeconds`` ends
the stream cleanly.

A slow client (:class:`~k8py.apiserver.watch.watcher.WatchLimits`): once its
connection holds more than ``_HIGH_WATER`` unsent bytes the cacher stops
writing to it; the stream's task then writes the backlog in frames of at
most ``frame_bytes``, each after the connection has drained below
``_LOW_WATER``. A connection that does not drain within
``slow_client_timeout``, or a backlog beyond ``max_pending_bytes``, ends the
watch: the connection is aborted (what the client has fully received stays
valid; it re-watches from its last resourceVersion) and ``on_slow_close``
counts it. Waiting for the drain polls the transport's buffer every 5 ms:
asyncio has no public drain signal for a transport written directly, and
aiohttp owns the protocol's flow-control callbacks (a backing-off poll
would leave a drained client idle for up to its interval).
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Any, Callable, Mapping

from aiohttp import web

from k8py.api.errors import Cause, Expired, InternalError, Invalid, StatusError
from k8py.apiserver.watch.cacher import Cacher
from k8py.apiserver.handlers.codec import ResponseFormat
from k8py.apiserver.handlers.listing import CONSISTENT_READ_TIMEOUT, parse_rv, too_large_rv
from k8py.apiserver.handlers.query import Query
from k8py.apiserver.registry import ResourceDefinition
from k8py.apiserver.watch.watch_cache import ADDED, TooOldResourceVersion, WatchCache
from k8py.apiserver.watch.clock import WatchClock
from k8py.apiserver.watch.watcher import WatchLimits, Watcher
from k8py.apiserver.handlers.request_info import query_bool
from k8py.apiserver.handlers.watch_encoding import WatchEncoder, error_line

__all__ = ["serve_watch"]

log = logging.getLogger(__name__)

_INITIAL_CHUNK = 512  # initial ADDED events per write
#: a client with more than this unread stops getting direct writes from the
#: cacher; its task waits until it is under the low mark
_HIGH_WATER = 4 * 1024 * 1024
_LOW_WATER = 256 * 1024
#: how often a backed-up stream looks at its connection's buffer
_DRAIN_POLL = 0.005


def _invalid_watch(field: str, message: str) -> Invalid:
    return Invalid.for_object("ListOptions", "", [Cause("FieldValueForbidden", message, field)], "meta.k8s.io")


async def serve_watch(
    request: web.Request,
    *,
    definition: ResourceDefinition,
    cacher: Cacher,
    cache: WatchCache,
    query: Query,
    params: Mapping[str, str],
    fmt: ResponseFormat,
    bookmark_interval: float,
    table: Callable[..., dict] | None = None,
    on_open: Callable[[int], None] | None = None,
    on_sent: Callable[[list[tuple[str, bytes]]], None] | None = None,
) -> web.StreamResponse:
    rv_param = params.get("resourceVersion", "")
    match = params.get("resourceVersionMatch", "")
    send_initial = query_bool(params.get("sendInitialEvents", ""))
    bookmarks = query_bool(params.get("allowWatchBookmarks", ""))
    timeout_param = params.get("timeoutSeconds", "")
    if timeout_param:
        try:
            timeout = max(float(int(timeout_param)), 0.0)
        except ValueError:
            raise Invalid.for_object("ListOptions", "", [Cause("FieldValueInvalid", f"Invalid value: {timeout_param!r}", "timeoutSeconds")], "meta.k8s.io") from None
    else:
        timeout = 1800.0 * (1 + random.random())  # upstream's minRequestTimeout spread
    if send_initial:
        if match != "NotOlderThan":
            raise _invalid_watch("resourceVersionMatch", 'Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan')
        if not bookmarks:
            raise _invalid_watch("allowWatchBookmarks", "Forbidden: sendInitialEvents requires setting allowWatchBookmarks to true")
    elif match:
        raise _invalid_watch("resourceVersionMatch", "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided")

    limits = cacher.watch_limits
    watcher = Watcher(query, max_pending_bytes=limits.max_pending_bytes)
    initial: list[tuple[str, bytes]] = []
    error: StatusError | None = None
    if send_initial or rv_param in ("", "0"):
        if rv_param == "":
            # most recent state; if the cache cannot confirm it has caught up
            # in time (etcd without frequent progress notifications), start
            # from what it has: every later change still follows
            await cacher.wait_consistent(timeout=CONSISTENT_READ_TIMEOUT)
        elif rv_param != "0":
            rv = parse_rv(rv_param)
            if not await cacher.wait_for_revision(rv, timeout=CONSISTENT_READ_TIMEOUT):
                raise too_large_rv(rv, cacher.revision)
        # snapshot and registration happen with no await between them: no event is lost or doubled
        start_rv = cache.revision
        initial = [(ADDED, o.data) for o in cache.candidates(query.namespace, query.index_value, query.name_value) if query.matches(o)]
        cache.add_watcher(watcher)
    else:
        rv = parse_rv(rv_param)
        start_rv = rv
        if rv > cache.revision:
            # a resourceVersion the cache has not reached (another API server
            # on the same etcd may be ahead): stream what comes after it, as
            # upstream's cache watcher does
            watcher.min_rv = rv
            cache.add_watcher(watcher)
        else:
            try:
                for event in cache.events_after(rv):
                    watcher.offer(event)
                cache.add_watcher(watcher)
            except TooOldResourceVersion as err:
                error = Expired.too_old(err.requested, err.oldest)

    encoder = WatchEncoder(definition, fmt, table, on_sent)
    opened = False
    response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    response.enable_chunked_encoding()
    try:
        await response.prepare(request)  # a StreamResponse sends its headers here
        stream = _ChunkedStream(request.transport, cacher.clock)
        if error is not None:
            stream.write(error_line(error))
            return response
        if on_open is not None:
            on_open(1)
            opened = True
        for i in range(0, len(initial), _INITIAL_CHUNK):
            try:
                frame = encoder.lines(await encoder.convert(initial[i : i + _INITIAL_CHUNK]))
            except Exception as err:
                log.exception("encoding initial watch events failed", extra={"resource": definition.plural})
                watcher.fail(f"unable to encode watch events: {err!r}")
                break
            stream.write(frame)
            if not await stream.drained(limits.slow_client_timeout, watcher):
                if watcher.terminated and not watcher.overflowed:
                    return response  # the server is closing every watch (shutdown, cache reload)
                raise _SlowClient()
        initial = []
        if send_initial and not watcher.terminated:
            stream.write(encoder.bookmark(start_rv, initial_events_end=True))

        share_key = encoder.share_key

        def sink(events: list[tuple[str, bytes]], frames: dict[Any, bytes] | None = None) -> bool:
            if stream.gone:
                watcher.terminate()
                return True
            if stream.backed_up or watcher.pending_bytes > limits.frame_bytes or encoder.slow:
                return False  # the task below writes them, in frames, as the client catches up
            if frames is None or share_key is None:
                stream.write(encoder.lines(events))
                return True
            # watchers owed the same events (the very same queued tuples, see
            # watcher) write the same chunk, encoded and framed once per flush
            key = (share_key, tuple(events))
            frame = frames.get(key)
            if frame is None:
                frame = frames[key] = _chunk(encoder.encode(events))
            if encoder.on_sent is not None:
                encoder.on_sent(events)
            stream.write_chunk(frame)
            return True

        watcher.sink = sink  # from here on the cacher writes live events directly
        if not watcher.terminated:
            cacher.liveness.add(watcher, lambda: stream.gone)  # one shared timer notices a client that left
            await _pump(stream, watcher, cache, encoder, bookmarks, bookmark_interval, timeout, limits)
        if watcher.overflowed:
            raise _SlowClient()
        if watcher.failure is not None and not stream.gone:
            # this watcher alone failed (its encoding, its selectors): say why, then end
            stream.write(error_line(InternalError(watcher.failure)))
    except _SlowClient:
        log.info("watch client too slow; closing its watch", extra={"resource": definition.plural, "overflowed": watcher.overflowed})
        stream.abort()
        if limits.on_slow_close is not None:
            limits.on_slow_close(definition.plural)
    except ConnectionResetError:
        pass  # the client went away; nothing to tell it
    finally:
        watcher.sink = None
        cacher.liveness.discard(watcher)
        cache.remove_watcher(watcher)
        if on_open is not None and opened:
            on_open(-1)
    return response


class _ChunkedStream:
    """Chunked-encoding frames written straight to the connection.

    aiohttp has sent the response headers when ``prepare`` returns; from then
    on every frame of the watch goes through here (initial events, live
    events flushed by the cacher, bookmarks), so they reach the socket in the
    order they are written, and the final zero-length chunk that aiohttp
    writes when the handler returns ends the stream properly.
    """

    def __init__(self, transport: asyncio.BaseTransport | None, clock: WatchClock) -> None:
        self.transport = transport
        self.clock = clock

    def abort(self) -> None:
        """Drop the connection and whatever it still buffers."""
        if self.transport is not None:
            self.transport.abort()  # type: ignore[attr-defined]

    @property
    def gone(self) -> bool:
        return self.transport is None or self.transport.is_closing()

    @property
    def backed_up(self) -> bool:
        assert self.transport is not None
        return self.transport.get_write_buffer_size() > _HIGH_WATER  # type: ignore[attr-defined]

    def write(self, data: bytes) -> None:
        if data:  # an empty frame would end the stream
            self.write_chunk(_chunk(data))

    def write_chunk(self, chunk: bytes) -> None:
        """Write a frame already in chunked encoding (:func:`_chunk`)."""
        if self.gone:
            raise ConnectionResetError("the watch client went away")
        self.transport.write(chunk)  # type: ignore[union-attr]

    async def drained(self, timeout: float, watcher: Watcher) -> bool:
        """Wait until the client has taken most of what was written; False
        if it has not within ``timeout`` seconds, or the watcher has been
        terminated meanwhile (see the module docstring)."""
        deadline = self.clock.now() + timeout
        while not self.gone and self.transport.get_write_buffer_size() > _LOW_WATER:  # type: ignore[union-attr]
            if watcher.terminated or self.clock.now() >= deadline:
                return False
            await asyncio.sleep(_DRAIN_POLL)
        if self.gone:
            raise ConnectionResetError("the watch client went away")
        return True


def _chunk(data: bytes) -> bytes:
    """``data`` as one chunk of the chunked transfer encoding (not empty)."""
    return b"%x\r\n%b\r\n" % (len(data), data)


class _SlowClient(Exception):
    """The watch client fell too far behind; its watch ends."""


async def _pump(
    stream: _ChunkedStream,
    watcher: Watcher,
    cache: WatchCache,
    encoder: WatchEncoder,
    bookmarks: bool,
    bookmark_interval: float,
    timeout: float,
    limits: WatchLimits,
) -> None:
    """The stream's own task: writes what the cacher could not (a backed-up
    client), bookmarks, and ends the stream on time or when told to."""
    clock = stream.clock
    deadline = clock.now() + timeout
    next_bookmark = clock.now() + bookmark_interval
    while True:
        now = clock.now()
        if now >= deadline:
            break
        if not watcher.pending and not watcher.terminated:
            # sleep until woken (events it must write, the end of the watch, or
            # the cacher's liveness sweep finding the client gone), the next
            # bookmark, or the deadline
            wake_at = min(deadline, next_bookmark) if bookmarks else deadline
            timer = clock.call_at(wake_at, watcher.wake.set)
            try:
                await watcher.wake.wait()
            finally:
                timer.cancel()
        events = watcher.take(limits.frame_bytes)
        if events:
            try:
                frame = encoder.lines(await encoder.convert(events))
            except Exception as err:
                log.exception("encoding watch events failed", extra={"resource": encoder.definition.plural})
                watcher.fail(f"unable to encode watch events: {err!r}")
                break
            stream.write(frame)
            if not await stream.drained(limits.slow_client_timeout, watcher):
                if watcher.terminated and not watcher.overflowed:
                    break  # the server is closing every watch (shutdown, cache reload)
                raise _SlowClient()
        if watcher.terminated or stream.gone:
            break
        if bookmarks and clock.now() >= next_bookmark and watcher.caught_up and cache.revision >= watcher.min_rv:
            # nothing queued: every event up to the cache's revision has been
            # written or was not for this watcher (see the module docstring)
            stream.write(encoder.bookmark(cache.revision))
            next_bookmark = clock.now() + bookmark_interval
