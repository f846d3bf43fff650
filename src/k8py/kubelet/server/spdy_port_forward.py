"""Port-forwarding over a SPDY/3.1 session tunnelled in a WebSocket (kubectl's protocol).

kubectl (the SPDY client) opens, for each local connection, an ``error``
stream and a ``data`` stream, both with headers ``port`` and ``requestid``.
This side (the server, as upstream's kubelet ``portforward/httpstream.go``):

- answers every SYN_STREAM with a SYN_REPLY at once;
- when both streams of a request id are there, connects to the pod's port
  and copies: data-stream DATA → the pod connection; the pod's bytes → DATA
  frames on the data stream. The client's FIN half-closes the pod connection;
  the pod's EOF sends FIN on the data stream;
- when one direction ends, waits at most ``linger`` (1 s, as containerd)
  for the other, then ends both and FINs the error stream — kubectl waits for
  that FIN to finish the connection. A failed connect writes upstream's
  message on the error stream first;
- answers PING (kubectl pings every few seconds), obeys RST_STREAM and
  GOAWAY, ignores SETTINGS and WINDOW_UPDATE (spdystream does no flow control).

Frames are written under one lock, built inside it: a header block's
compression context depends on the order frames go out.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Awaitable, Callable

from aiohttp import WSMsgType, web

from k8py.api import spdy

__all__ = ["SpdyPortForward", "Connector"]

log = logging.getLogger(__name__)

Connector = Callable[[int], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]

#: largest DATA frame sent (spdystream reads any size; kubectl's own are 32 KiB)
CHUNK = 32 * 1024


@dataclass
class _Stream:
    id: int
    kind: str
    request_id: str
    port: str
    inbox: asyncio.Queue[bytes | None] = field(default_factory=lambda: asyncio.Queue(maxsize=64))
    fin_sent: bool = False


class SpdyPortForward:
    def __init__(self, ws: web.WebSocketResponse, connect: Connector, *, linger: float = 1.0) -> None:
        self._ws = ws
        self._connect = connect
        self._linger = linger
        self._reader = spdy.FrameReader()
        self._writer = spdy.FrameWriter()
        self._lock = asyncio.Lock()
        self._streams: dict[int, _Stream] = {}
        self._pairs: dict[str, dict[str, _Stream]] = {}
        self._forwards: set[asyncio.Task[None]] = set()

    async def _send(self, build: Callable[[spdy.FrameWriter], bytes]) -> None:
        async with self._lock:
            if self._ws.closed:
                return
            await self._ws.send_bytes(build(self._writer))

    async def run(self) -> None:
        try:
            async for msg in self._ws:
                if msg.type != WSMsgType.BINARY:
                    continue
                try:
                    frames = self._reader.feed(msg.data)
                except spdy.ProtocolError as err:
                    log.info("port-forward: bad SPDY from the client", extra={"error": str(err)})
                    return
                for frame in frames:
                    if not await self._handle(frame):
                        return
        finally:
            for task in self._forwards:
                task.cancel()
            await asyncio.gather(*self._forwards, return_exceptions=True)

    async def _handle(self, frame: spdy.DataFrame | spdy.ControlFrame) -> bool:
        """False when the session is over (GOAWAY)."""
        if isinstance(frame, spdy.DataFrame):
            stream = self._streams.get(frame.stream_id)
            if stream is not None:
                if frame.data:
                    await stream.inbox.put(frame.data)
                if frame.fin:
                    await stream.inbox.put(None)
            return True
        if frame.type == spdy.SYN_STREAM:
            await self._open(frame)
        elif frame.type == spdy.PING:
            await self._send(lambda w: w.ping(frame.ping_id))
        elif frame.type == spdy.RST_STREAM:
            stream = self._streams.pop(frame.stream_id, None)
            if stream is not None:
                stream.fin_sent = True  # nothing more may be sent on it
                if not stream.inbox.full():
                    stream.inbox.put_nowait(None)
        elif frame.type == spdy.GOAWAY:
            return False
        return True

    async def _open(self, frame: spdy.ControlFrame) -> None:
        kind, request_id, port = frame.header("streamtype"), frame.header("requestid"), frame.header("port")
        stream = _Stream(frame.stream_id, kind, request_id, port)
        self._streams[stream.id] = stream
        await self._send(lambda w: w.syn_reply(stream.id))
        if kind not in ("data", "error"):
            await self._send(lambda w: w.rst_stream(stream.id, spdy.RST_PROTOCOL_ERROR))
            return
        pair = self._pairs.setdefault(request_id, {})
        pair[kind] = stream
        if "data" in pair and "error" in pair:
            del self._pairs[request_id]
            task = asyncio.create_task(self._forward(pair["data"], pair["error"]), name=f"portforward-{port}-{request_id}")
            self._forwards.add(task)
            task.add_done_callback(self._forwards.discard)

    async def _fin(self, stream: _Stream, data: bytes = b"") -> None:
        if not stream.fin_sent:
            stream.fin_sent = True
            await self._send(lambda w: w.data(stream.id, data, fin=True))

    async def _forward(self, data: _Stream, error: _Stream) -> None:
        try:
            port = int(data.port)
        except ValueError:
            await self._fin(error, f"invalid port {data.port!r}".encode())
            await self._fin(data)
            return
        try:
            reader, writer = await self._connect(port)
        except ConnectionError as err:
            await self._fin(error, str(err).encode())
            await self._fin(data)
            return

        async def to_pod() -> None:
            while (chunk := await data.inbox.get()) is not None:
                writer.write(chunk)
                await writer.drain()
            if writer.can_write_eof():
                writer.write_eof()

        async def to_client() -> None:
            while chunk := await reader.read(CHUNK):
                if data.fin_sent:
                    return
                await self._send(lambda w: w.data(data.id, chunk))
            await self._fin(data)

        tasks = [
            asyncio.create_task(to_pod(), name=f"portforward-{port}-in"),
            asyncio.create_task(to_client(), name=f"portforward-{port}-out"),
        ]
        try:
            _, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            if pending:
                await asyncio.wait(pending, timeout=self._linger)
        except (ConnectionError, OSError) as err:
            log.debug("port-forward connection ended", extra={"port": port, "error": str(err)})
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            writer.close()
            await self._fin(data)
            await self._fin(error)
            self._streams.pop(data.id, None)
            self._streams.pop(error.id, None)
