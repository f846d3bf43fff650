"""Relay a WebSocket upgrade (exec-style streams) to an aggregated API server.

A request with ``Upgrade: websocket`` for an aggregated group (an
extension's ``.../exec``, ``.../attach``, ``.../portforward``-like
subresource) is relayed message for message, as upstream's proxy tunnels the
upgraded connection: the backend is dialled first, over the same TLS and
with the same front-proxy identity (``X-Remote-*``) as a plain request, with
the subprotocols the client offered; only once it has accepted is the
client upgraded, with the subprotocol the backend chose. A backend that
refuses the upgrade answers the same request without one, so the client gets
the backend's own error, not a bare handshake failure. After both are open,
binary and text messages are copied each way until one side closes; the
other is closed with its close code.

``Upgrade: SPDY/3.1`` (what kubectl falls back to when a WebSocket upgrade
fails, and older clients use) is tunnelled byte for byte by :mod:`.upgrade`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

import aiohttp
from aiohttp import web

from k8py.apiserver.streaming.websocket_relay import copy_messages

__all__ = ["is_websocket", "relay_websocket"]

log = logging.getLogger(__name__)

#: set by aiohttp's WebSocket client itself
_HANDSHAKE = frozenset(("sec-websocket-key", "sec-websocket-version", "sec-websocket-protocol",
                        "sec-websocket-extensions"))


def is_websocket(request: web.Request) -> bool:
    return request.headers.get("Upgrade", "").lower() == "websocket"


def _offered(request: web.Request) -> tuple[str, ...]:
    return tuple(p.strip() for v in request.headers.getall("Sec-WebSocket-Protocol", []) for p in v.split(",")
                 if p.strip())


async def relay_websocket(request: web.Request, session: aiohttp.ClientSession, url: str,
                          headers: list[tuple[str, str]], *, ssl: object, server_hostname: str | None,
                          refused: Callable[[], Awaitable[web.StreamResponse]], name: str) -> web.StreamResponse:
    """Relay the upgrade to ``url``; ``refused()`` answers when the backend does not upgrade."""
    forwarded = [(k, v) for k, v in headers if k.lower() not in _HANDSHAKE]
    try:
        upstream = await session.ws_connect(url, headers=forwarded, protocols=_offered(request), ssl=ssl,
                                            server_hostname=server_hostname, max_msg_size=0, autoping=True)
    except aiohttp.WSServerHandshakeError:
        return await refused()  # the backend's own answer to the request, without the upgrade
    client = web.WebSocketResponse(protocols=(upstream.protocol,) if upstream.protocol else (), max_msg_size=0,
                                   autoping=True)
    try:
        await client.prepare(request)
        to_backend = asyncio.create_task(copy_messages(client, upstream), name=f"aggregator-ws-to-{name}")
        to_client = asyncio.create_task(copy_messages(upstream, client), name=f"aggregator-ws-from-{name}")
        try:
            done, _ = await asyncio.wait((to_backend, to_client), return_when=asyncio.FIRST_COMPLETED)
            first = done.pop()
            code = first.result()
            peer = upstream if first is to_backend else client
            if not peer.closed:
                await peer.close(code=code)
        finally:
            for task in (to_backend, to_client):
                task.cancel()
            await asyncio.gather(to_backend, to_client, return_exceptions=True)
    except (ConnectionResetError, aiohttp.ClientConnectionError):
        log.debug("aggregated WebSocket relay ended by a dropped connection", extra={"apiservice": name})
    finally:
        if not upstream.closed:
            await upstream.close()
        if not client.closed:
            await client.close()
    return client
