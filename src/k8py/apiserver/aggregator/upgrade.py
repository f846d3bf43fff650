"""Relay an ``Upgrade: SPDY/3.1`` request (kubectl's older streaming protocol) to an aggregated API server.

As upstream's ``UpgradeAwareHandler``: the backend is dialled over the same
TLS and sent the request itself — method, path and query, the forwarded
headers with the front-proxy identity (``X-Remote-*``), ``Connection:
Upgrade`` and the client's ``Upgrade`` and ``X-Stream-Protocol-Version``
headers — then its answer is read:

- anything but ``101 Switching Protocols`` is handed back as an ordinary
  response (the backend's Status when it refuses), body and all;
- on ``101`` the client gets the backend's 101 (its ``Upgrade`` and
  ``X-Stream-Protocol-Version``), and from then on the two connections are
  one tunnel: bytes are copied each way, unparsed (SPDY frames, compressed
  headers and all), until either side closes, and the other is closed.

aiohttp's server only treats ``websocket`` upgrades as upgrades, so
:func:`hijack` takes the client's connection over itself once the 101 is
sent: the rest of its bytes are fed to a queue (the protocol's parser hook the
WebSocket response uses too) and written back straight to the transport.
Reading pauses while more than ``_HIGH_WATER`` bytes wait for the backend.
:func:`hijack` is also what a server in k8py (or a test's backend) uses to
accept such an upgrade.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from dataclasses import dataclass
from typing import Iterable
from urllib.parse import urlsplit

from aiohttp import web
from aiohttp.http_writer import StreamWriter

from k8py.api.errors import ServiceUnavailable

__all__ = ["is_spdy", "relay_upgrade", "hijack", "ClientTunnel"]

log = logging.getLogger(__name__)

_HIGH_WATER = 1 << 20
_HEAD_LIMIT = 64 * 1024
#: not copied from the backend's answer (hop-by-hop; aiohttp sets its own)
_ANSWER_DROPPED = frozenset(("connection", "keep-alive", "transfer-encoding", "content-length", "upgrade",
                             "date", "server"))


def is_spdy(request: web.Request) -> bool:
    return request.headers.get("Upgrade", "").lower().startswith("spdy/")


class _Feed:
    """The parser hook: the client's bytes after the upgrade, into a queue."""

    def __init__(self, protocol: web.RequestHandler) -> None:
        self.queue: asyncio.Queue[bytes] = asyncio.Queue()
        self.protocol = protocol
        self.queued = 0
        self.paused = False

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        self.queue.put_nowait(bytes(data))
        self.queued += len(data)
        if self.queued > _HIGH_WATER and not self.paused and self.protocol.transport is not None:
            self.protocol.transport.pause_reading()
            self.paused = True
        return False, b""

    def feed_eof(self) -> None:
        self.queue.put_nowait(b"")

    async def read(self) -> bytes:
        data = await self.queue.get()
        self.queued -= len(data)
        if self.paused and self.queued <= _HIGH_WATER // 2 and self.protocol.transport is not None:
            self.protocol.transport.resume_reading()
            self.paused = False
        return data


@dataclass
class ClientTunnel:
    """The client's side of an upgraded connection: ``read`` (b"" at the end), ``write``, ``close``."""

    feed: _Feed
    writer: StreamWriter
    request: web.Request

    async def read(self) -> bytes:
        return await self.feed.read()

    async def write(self, data: bytes) -> None:
        await self.writer.write(data)

    def close(self) -> None:
        transport = self.request.transport
        if transport is not None and not transport.is_closing():
            transport.close()


async def hijack(request: web.Request, headers: Iterable[tuple[str, str]]) -> tuple[web.StreamResponse, ClientTunnel]:
    """Answer ``101 Switching Protocols`` with ``headers`` and take the connection over (see the docstring)."""
    response = web.StreamResponse(status=101, reason="Switching Protocols")
    for key, value in headers:
        response.headers.add(key, value)
    response.headers["Connection"] = "Upgrade"
    response.headers.setdefault("Upgrade", request.headers.get("Upgrade", ""))
    await response.prepare(request)
    protocol = request.protocol
    protocol.keep_alive(False)
    feed = _Feed(protocol)
    protocol.set_parser(feed)  # type: ignore[arg-type]  # anything with feed_data/feed_eof
    return response, ClientTunnel(feed, StreamWriter(protocol, asyncio.get_running_loop()), request)


def _head(method: str, target: str, host: str, headers: list[tuple[str, str]], upgrade: str, body: bytes) -> bytes:
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}"]
    lines += [f"{k}: {v}" for k, v in headers if k.lower() not in ("connection", "upgrade", "host", "content-length")]
    lines += ["Connection: Upgrade", f"Upgrade: {upgrade}", f"Content-Length: {len(body)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def _parse_head(head: bytes) -> tuple[int, str, list[tuple[str, str]]]:
    status_line, *lines = head.decode("latin-1").rstrip("\r\n").split("\r\n")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise ValueError(f"not an HTTP response: {status_line[:80]!r}")
    answer = [(k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in lines) if k.strip()]
    return int(parts[1]), parts[2] if len(parts) > 2 else "", answer


async def _read_body(reader: asyncio.StreamReader, headers: list[tuple[str, str]]) -> bytes:
    values = {k.lower(): v for k, v in headers}
    if "chunked" in values.get("transfer-encoding", "").lower():
        body = bytearray()
        while True:
            size = int((await reader.readline()).split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                await reader.readline()
                return bytes(body)
            body += await reader.readexactly(size)
            await reader.readline()
    if "content-length" in values:
        return await reader.readexactly(int(values["content-length"]))
    return await reader.read()


async def _pump_to_backend(client: ClientTunnel, writer: asyncio.StreamWriter) -> None:
    while data := await client.read():
        writer.write(data)
        await writer.drain()


async def _pump_to_client(reader: asyncio.StreamReader, client: ClientTunnel) -> None:
    while data := await reader.read(65536):
        await client.write(data)


async def relay_upgrade(request: web.Request, url: str, headers: list[tuple[str, str]], *, ssl_context: ssl.SSLContext,
                        server_hostname: str | None, name: str) -> web.StreamResponse:
    """Send the upgrade to ``url``; tunnel if the backend switches protocols, else hand back its answer."""
    parts = urlsplit(url)
    body = await request.read() if request.body_exists else b""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(
            parts.hostname, parts.port or 443, ssl=ssl_context, server_hostname=server_hostname, limit=_HEAD_LIMIT), 10.0)
    except (OSError, asyncio.TimeoutError, ssl.SSLError) as err:
        log.warning("aggregated API server unreachable", extra={"apiservice": name, "error": str(err)})
        raise ServiceUnavailable(f"the server is currently unable to handle the request ({name}: {err or type(err).__name__})") from None
    try:
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        writer.write(_head(request.method, target, parts.netloc, headers, request.headers.get("Upgrade", ""), body))
        await writer.drain()
        try:
            status, reason, answer = _parse_head(await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 60.0))
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError, ValueError, OSError) as err:
            raise ServiceUnavailable(f"the server is currently unable to handle the request ({name}: {err or type(err).__name__})") from None
        kept = [(k, v) for k, v in answer if k.lower() not in _ANSWER_DROPPED]
        if status != 101:
            refused = web.Response(status=status, reason=reason or None, body=await _read_body(reader, answer))
            for key, value in kept:
                refused.headers.add(key, value)
            return refused
        upgrade = next((v for k, v in answer if k.lower() == "upgrade"), request.headers.get("Upgrade", ""))
        response, client = await hijack(request, [*kept, ("Upgrade", upgrade)])
        to_backend = asyncio.create_task(_pump_to_backend(client, writer), name=f"aggregator-upgrade-to-{name}")
        to_client = asyncio.create_task(_pump_to_client(reader, client), name=f"aggregator-upgrade-from-{name}")
        try:
            await asyncio.wait((to_backend, to_client), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (to_backend, to_client):
                task.cancel()
            results = await asyncio.gather(to_backend, to_client, return_exceptions=True)
            for result in results:
                if isinstance(result, Exception) and not isinstance(result, (ConnectionError, asyncio.CancelledError)):
                    log.debug("aggregated upgrade relay ended", extra={"apiservice": name, "error": str(result)})
            client.close()
        return response
    finally:
        writer.close()
