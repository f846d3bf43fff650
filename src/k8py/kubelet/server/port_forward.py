"""``/portForward/NS/POD`` over WebSocket: plain channels, or SPDY tunnelled by kubectl.

Two protocols, as the upstream kubelet (and API server) serve:

- ``SPDY/3.1+portforward.k8s.io`` (what kubectl 1.31+ sends): the WebSocket's
  binary messages carry a SPDY/3.1 session (:mod:`.spdy_port_forward`); each
  forwarded connection is a pair of streams named by ``requestid``.
- ``portforward.k8s.io`` / ``v4.channel.k8s.io`` (the official Python client;
  ``port`` query parameters): port *i* is data channel ``2i`` and error
  channel ``2i+1``; the server's first message on each is the port
  (little-endian uint16). One TCP connection per port, opened at once; the
  socket closes when every port's connection has ended.

Where a connection goes is the runtime's answer
(``port_forward_address(sandbox, port)``: the pod's IP in the process runtime),
or, on a runtime that streams itself (CRI), its ``port_forward_stream``.
A connection that cannot be made is reported on the port's error channel
(or error stream) with upstream's wording.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

from aiohttp import WSMsgType, web

from k8py.api import stream_channels as ch
from k8py.kubelet.runtime.protocols import RemoteStreamingRuntime, RuntimeErrorStatus
from k8py.kubelet.server.containers import KubeletError, find_pod
from k8py.kubelet.server.spdy_port_forward import Connector, SpdyPortForward
from k8py.kubelet.server_context import ServerContext

__all__ = ["port_forward_handler"]

log = logging.getLogger(__name__)

_PROTOCOLS = (ch.TUNNEL_PORTFORWARD, *ch.PORTFORWARD_PROTOCOLS)


def _connector(ctx: ServerContext, sandbox_id: str, pod: str) -> Connector:
    runtime = ctx.runtime
    if isinstance(runtime, RemoteStreamingRuntime):  # CRI: through the runtime, inside the pod's network namespace
        async def remote(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
            try:
                return await runtime.port_forward_stream(sandbox_id, port)
            except (RuntimeErrorStatus, OSError) as err:
                raise ConnectionError(f"error forwarding port {port} to pod {pod}, uid : {err}") from None

        return remote

    async def connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        host, target = await ctx.runtime.port_forward_address(sandbox_id, port)
        try:
            return await asyncio.open_connection(host, target)
        except OSError as err:
            raise ConnectionError(
                f"error forwarding port {port} to pod {pod}, uid : failed to connect to {host}:{target}: {err.strerror or err}"
            ) from None

    return connect


def port_forward_handler(ctx: ServerContext) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handler(request: web.Request) -> web.StreamResponse:
        ns, name = request.match_info["namespace"], request.match_info["pod"]
        try:
            find_pod(ctx, ns, name)
            sandbox = ctx.pods.sandbox_id(ns, name)
            if sandbox is None:
                raise KubeletError(400, f'pod "{name}" has no running sandbox: cannot forward ports to it')
            if request.headers.get("Upgrade", "").lower() != "websocket":
                raise KubeletError(400, f"port-forward is served over WebSocket ({', '.join(_PROTOCOLS)})")
            offered = request.headers.getall("Sec-WebSocket-Protocol", [])
            protocol = ch.negotiate(offered, _PROTOCOLS) if offered else ""
            if protocol is None:
                raise KubeletError(400, f"no supported WebSocket subprotocol offered; the kubelet serves {', '.join(_PROTOCOLS)}")
            ports = _ports(request) if protocol != ch.TUNNEL_PORTFORWARD else []
        except KubeletError as err:
            return web.Response(status=err.code, body=err.body(), content_type="application/json")
        ws = web.WebSocketResponse(protocols=(protocol,) if protocol else (), max_msg_size=0)
        await ws.prepare(request)
        connect = _connector(ctx, sandbox, name)
        try:
            if protocol == ch.TUNNEL_PORTFORWARD:
                await SpdyPortForward(ws, connect).run()
            else:
                await _channels(ws, ports, connect)
        except* ConnectionError:
            log.debug("port-forward client went away", extra={"pod": f"{ns}/{name}"})
        finally:
            if not ws.closed:
                await ws.close()
        return ws

    return handler


def _ports(request: web.Request) -> list[int]:
    ports = []
    for raw in request.query.getall("port", []):
        try:
            port = int(raw)
        except ValueError:
            port = 0
        if not 1 <= port <= 65535:
            raise KubeletError(400, f"invalid port {raw!r}: a port must be between 1 and 65535")
        ports.append(port)
    if not ports:
        raise KubeletError(400, 'query parameter "port" is required')
    return ports


async def _channels(ws: web.WebSocketResponse, ports: list[int], connect: Connector) -> None:
    for i, port in enumerate(ports):
        await ws.send_bytes(ch.frame(2 * i, ch.port_prefix(port)))
        await ws.send_bytes(ch.frame(2 * i + 1, ch.port_prefix(port)))
    # what the client sends waits here until its port's connection is open (the client may
    # write at once, before the connect completes); bounded, so a pod that stops reading
    # stops the client
    inboxes: dict[int, asyncio.Queue[bytes]] = {2 * i: asyncio.Queue(maxsize=64) for i in range(len(ports))}

    async def forward(i: int, port: int) -> None:
        try:
            reader, writer = await connect(port)
        except ConnectionError as err:
            inboxes.pop(2 * i, None)
            await ws.send_bytes(ch.frame(2 * i + 1, str(err).encode()))
            return

        async def to_pod() -> None:
            inbox = inboxes[2 * i]
            while True:
                writer.write(await inbox.get())
                await writer.drain()

        pump = asyncio.create_task(to_pod(), name=f"portforward-{port}-in")
        try:
            while data := await reader.read(32768):
                await ws.send_bytes(ch.frame(2 * i, data))
        finally:
            inboxes.pop(2 * i, None)
            pump.cancel()
            await asyncio.gather(pump, return_exceptions=True)
            writer.close()

    async def from_client() -> None:
        async for msg in ws:
            data = msg.data.encode() if msg.type == WSMsgType.TEXT else msg.data if msg.type == WSMsgType.BINARY else b""
            if not data:
                continue
            inbox = inboxes.get(data[0])
            if inbox is not None:
                await inbox.put(data[1:])

    async with asyncio.TaskGroup() as tg:
        client = tg.create_task(from_client(), name="portforward-client")
        forwards = [tg.create_task(forward(i, p), name=f"portforward-{p}") for i, p in enumerate(ports)]
        done, _ = await asyncio.wait([client, asyncio.gather(*forwards, return_exceptions=True)], return_when=asyncio.FIRST_COMPLETED)
        for task in (client, *forwards):
            task.cancel()
