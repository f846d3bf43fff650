"""A SPDY/3.1 client for a CRI runtime's streaming server (the URL ``Exec``/``Attach``/``PortForward`` return).

containerd's streaming server (upstream's ``cri/streaming``, vendored) speaks
SPDY/3.1 and, for exec and attach, WebSocket ``v4.channel.k8s.io``. The
kubelet uses SPDY: only SPDY can half-close a stream, which is how a client
says "stdin is finished" to a v4 server (``echo hi | kubectl exec -i … cat``
needs it), and port-forward is SPDY only.

A session is one TCP connection: an HTTP/1.1 ``Upgrade: SPDY/3.1`` request
with ``X-Stream-Protocol-Version``, the server's ``101``, then SPDY frames
(:mod:`k8py.api.spdy`). The client opens every stream (odd ids from 1),
naming each by its headers (``streamType``, and for port-forward ``port`` and
``requestID``); the server answers each with SYN_REPLY, sends DATA, and ends a
stream with FIN (or RST_STREAM).

Invariants:
- a refusal before the upgrade (an expired URL, a bad request) raises
  :class:`StreamRefused` with the server's status and body;
- frames are built and written under one lock (the header compression
  context depends on the order frames leave);
- a stream's inbox is bounded: a consumer that stops reading stops the
  session's reader, which is TCP's backpressure all the way to the runtime;
- when the connection ends every stream reads EOF; :meth:`SpdySession.close`
  sends GOAWAY, closes the socket and ends the reader task.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
from urllib.parse import urlsplit

from k8py.api import spdy

__all__ = ["SpdySession", "SpdyStream", "StreamRefused"]

log = logging.getLogger(__name__)

#: largest DATA frame written (spdystream reads any size; kubectl's own are 32 KiB)
CHUNK = 32 * 1024
#: chunks a stream holds unread before the session stops reading the connection
INBOX = 64


class StreamRefused(ConnectionError):
    """The streaming server answered the upgrade with ``status`` (not 101); ``body`` is its message."""

    def __init__(self, url: str, status: int, body: str) -> None:
        super().__init__(f"the runtime's streaming server refused {url}: HTTP {status}: {body.strip() or '(no body)'}")
        self.status = status
        self.body = body


class SpdyStream:
    def __init__(self, session: "SpdySession", stream_id: int, headers: dict[str, list[str]]) -> None:
        self._session = session
        self.id = stream_id
        self.headers = headers
        self.replied = asyncio.Event()
        self.write_closed = False
        self._chunks: collections.deque[bytes] = collections.deque()
        self._readable = asyncio.Event()
        self._room = asyncio.Event()
        self._eof = False

    async def read(self) -> bytes:
        """The next chunk the server sent; ``b""`` once the stream (or the connection) has ended."""
        while not self._chunks:
            if self._eof:
                return b""
            self._readable.clear()
            await self._readable.wait()
        self._room.set()
        return self._chunks.popleft()

    async def read_all(self) -> bytes:
        parts = []
        while chunk := await self.read():
            parts.append(chunk)
        return b"".join(parts)

    async def write(self, data: bytes) -> None:
        if self.write_closed:
            return
        view = memoryview(data)
        for start in range(0, len(view), CHUNK):
            part = bytes(view[start : start + CHUNK])
            await self._session._send(lambda w: w.data(self.id, part))

    async def close_write(self) -> None:
        """FIN: the server's side of this stream reads EOF (stdin closed, or a forwarded connection half-closed)."""
        if not self.write_closed:
            self.write_closed = True
            await self._session._send(lambda w: w.data(self.id, b"", fin=True))

    async def _push(self, data: bytes) -> None:
        self._chunks.append(data)
        self._readable.set()
        while len(self._chunks) >= INBOX and not self._eof:
            self._room.clear()
            await self._room.wait()

    def _ended(self) -> None:
        self._eof = True
        self._readable.set()
        self._room.set()


class SpdySession:
    def __init__(self, url: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, protocol: str) -> None:
        self.url = url
        self.protocol = protocol
        self._reader = reader
        self._writer = writer
        self._frames_in = spdy.FrameReader()
        self._frames_out = spdy.FrameWriter()
        self._lock = asyncio.Lock()
        self._ids = itertools.count(1, 2)
        self._streams: dict[int, SpdyStream] = {}
        self.closed = asyncio.Event()
        self._task = asyncio.create_task(self._read_frames(), name=f"spdy-client-{urlsplit(url).path}")

    @classmethod
    async def connect(cls, url: str, protocol: str, *, timeout: float = 30.0) -> "SpdySession":
        """Upgrade a connection to ``url`` to SPDY/3.1 speaking ``protocol`` (``v4.channel.k8s.io``, ``portforward.k8s.io``)."""
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"streaming URL {url!r}: expected http://host:port/... (the runtime's stream_server_address)")
        reader, writer = await asyncio.wait_for(asyncio.open_connection(parts.hostname, parts.port or 80), timeout)
        try:
            target = parts.path + (f"?{parts.query}" if parts.query else "")
            writer.write((f"POST {target} HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Length: 0\r\n"
                          f"Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: {protocol}\r\n\r\n").encode())
            await writer.drain()
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
            status_line, *header_lines = head.decode("latin-1").split("\r\n")
            status = int(status_line.split()[1])
            if status != 101:
                length = next((int(h.split(":", 1)[1]) for h in header_lines if h.lower().startswith("content-length:")), None)
                body = await asyncio.wait_for(reader.readexactly(length) if length is not None else reader.read(65536), timeout)
                raise StreamRefused(url, status, body.decode(errors="replace"))
        except BaseException:
            writer.close()
            raise
        return cls(url, reader, writer, protocol)

    async def _send(self, build) -> None:  # build(FrameWriter) -> bytes
        async with self._lock:
            if self._writer.is_closing():
                raise ConnectionResetError(f"the streaming connection to {self.url} is closed")
            self._writer.write(build(self._frames_out))
            await self._writer.drain()

    async def open_stream(self, headers: dict[str, str], *, timeout: float = 30.0) -> SpdyStream:
        """SYN_STREAM with ``headers``; returns once the server has replied."""
        stream_id = next(self._ids)
        stream = SpdyStream(self, stream_id, {k.lower(): [v] for k, v in headers.items()})
        self._streams[stream_id] = stream
        await self._send(lambda w: w.syn_stream(stream_id, stream.headers))
        replied = asyncio.ensure_future(stream.replied.wait())
        ended = asyncio.ensure_future(self.closed.wait())
        try:
            await asyncio.wait_for(asyncio.wait((replied, ended), return_when=asyncio.FIRST_COMPLETED), timeout)
        finally:
            replied.cancel()
            ended.cancel()
        if not stream.replied.is_set():
            raise ConnectionResetError(f"the streaming server at {self.url} did not accept stream {headers}")
        return stream

    async def _read_frames(self) -> None:
        try:
            while data := await self._reader.read(65536):
                for frame in self._frames_in.feed(data):
                    await self._dispatch(frame)
        except (ConnectionError, spdy.ProtocolError) as err:
            log.debug("streaming connection ended", extra={"url": self.url, "error": str(err)})
        finally:
            self.closed.set()
            for stream in self._streams.values():
                stream._ended()

    async def _dispatch(self, frame: spdy.Frame) -> None:
        if isinstance(frame, spdy.DataFrame):
            stream = self._streams.get(frame.stream_id)
            if stream is None:
                return
            if frame.data:
                await stream._push(frame.data)
            if frame.fin:
                stream._ended()
            return
        if frame.type == spdy.SYN_REPLY:
            stream = self._streams.get(frame.stream_id)
            if stream is not None:
                stream.replied.set()
                if frame.fin:
                    stream._ended()
        elif frame.type == spdy.RST_STREAM:
            stream = self._streams.get(frame.stream_id)
            if stream is not None:
                stream.write_closed = True
                stream._ended()
        elif frame.type == spdy.PING:
            await self._send(lambda w: w.ping(frame.ping_id))
        elif frame.type == spdy.SYN_STREAM:  # servers do not open streams in these protocols
            await self._send(lambda w: w.rst_stream(frame.stream_id, spdy.RST_REFUSED_STREAM))
        elif frame.type == spdy.GOAWAY:
            log.debug("streaming server sent GOAWAY", extra={"url": self.url})

    async def close(self) -> None:
        if not self._writer.is_closing():
            try:
                await self._send(lambda w: w.goaway(0))
            except ConnectionError:
                pass
            self._writer.close()
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        try:
            await self._writer.wait_closed()
        except ConnectionError:
            pass

    async def __aenter__(self) -> "SpdySession":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
