"""Relaying a WebSocket stream to the kubelet, message for message.

exec, attach and port-forward are served by the kubelet; the API server
checks the request, opens the same kind of WebSocket to the kubelet with the
subprotocol the client offered, and only then upgrades the client with the
subprotocol the kubelet chose — so a kubelet that refuses (container not
running, bad options) gives the client an ordinary HTTP ``Status`` error
rather than a socket that opens and dies. After both are open, binary and
text messages are copied each way unchanged (channel bytes, v5 CLOSE
messages and tunnelled SPDY included) until one side closes; the other is
then closed with the same code.

For exec and attach (``hold_until_pong``) nothing from the kubelet reaches the
client before the client has answered a ping. client-go registers its
stdout/stderr streams in one goroutine while another already reads the
socket, and drops a message for a stream it has not registered yet ("Unknown
stream id 1, discarding message" on kubectl's stderr): the kubelet's empty
"connection established" message, or the first output of a quick command,
arrived in that gap. Its pong comes from the reading goroutine once it runs,
by when the streams are there (creating them is a few map writes). Messages
the client sends meanwhile (stdin) go through at once; a client that does
not answer within :data:`PONG_WAIT` seconds is sent the output anyway.

Why not SPDY here: kubectl 1.32 opens exec/attach with WebSocket
(``v5.channel.k8s.io``) and tunnels port-forward's SPDY inside a WebSocket
(``SPDY/3.1+portforward.k8s.io``). Its fallback to a plain ``Upgrade:
SPDY/3.1`` POST happens only when the WebSocket upgrade fails, and then gets
the same Status error the WebSocket attempt got (the checks run first).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from typing import Callable, Iterable

import aiohttp
from aiohttp import WSMsgType, web

from k8py.api.errors import BadRequest, ServiceUnavailable
from k8py.api.stream_channels import negotiate
from k8py.apiserver.streaming.kubelet_client import KubeletClient, status_error_from_response

__all__ = ["relay_websocket", "offered_protocols", "copy_messages", "PONG_WAIT"]

log = logging.getLogger(__name__)

#: how long the kubelet's output waits for a client's first pong (``hold_until_pong``)
PONG_WAIT = 5.0


def offered_protocols(request: web.Request) -> list[str]:
    return [p.strip() for v in request.headers.getall("Sec-WebSocket-Protocol", []) for p in v.split(",") if p.strip()]


def _is_websocket(request: web.Request) -> bool:
    return request.headers.get("Upgrade", "").lower() == "websocket"


async def relay_websocket(
    request: web.Request,
    kubelets: KubeletClient,
    url: str,
    params: list[tuple[str, str]],
    supported: Iterable[str],
    *,
    what: str,
    unnamed: bool = False,
    hold_until_pong: bool = False,
) -> web.StreamResponse:
    """``unnamed``: a client that offers no subprotocol at all gets the unnamed one (the base
    binary channel protocol), as upstream serves it (kr8s offers none). ``hold_until_pong``:
    the kubelet's messages wait for the client's answer to a first ping (module docstring)."""
    supported = tuple(supported)
    if not _is_websocket(request):
        # kubectl retries a failed WebSocket upgrade as SPDY: give it the
        # kubelet's refusal (container not running …), which its checks answer
        # without an upgrade, rather than a protocol complaint that hides it
        await _kubelet_refusal(kubelets, url, params)
        upgrade = request.headers.get("Upgrade", "")
        hint = f" (this request asked for {upgrade!r})" if upgrade else ""
        raise BadRequest(
            f"{what} is served over WebSocket with the subprotocols {', '.join(supported)}{hint}: "
            "use kubectl 1.30 or newer, or a client that speaks these"
        )
    offered = offered_protocols(request)
    protocol = "" if unnamed and not offered else negotiate(offered, supported)
    if protocol is None:
        raise BadRequest(
            f"none of the WebSocket subprotocols offered ({', '.join(offered) or 'none'}) is served for {what}; "
            f"k8py serves {', '.join(supported)}"
        )
    try:
        upstream = await kubelets.session.ws_connect(url, params=params, protocols=(protocol,) if protocol else (),
                                                     max_msg_size=0, autoping=True)
    except aiohttp.WSServerHandshakeError as err:
        # the handshake's body is gone: ask again without upgrading, and the
        # kubelet's checks answer with the Status they refused with
        await _kubelet_refusal(kubelets, url, params)
        raise ServiceUnavailable(f"the kubelet refused the {what} stream (HTTP {err.status} {err.message})") from None
    except (aiohttp.ClientError, OSError) as err:
        raise ServiceUnavailable(f"cannot reach the kubelet at {url} ({err}): is it running?") from None

    chosen = upstream.protocol or protocol
    # pings and pongs are answered by copy_messages, which must see the first pong
    client = web.WebSocketResponse(protocols=(chosen,) if chosen else (), max_msg_size=0, autoping=False)
    ready = asyncio.Event()
    token = secrets.token_bytes(8)

    def on_pong(data: bytes) -> None:
        if data == token:
            ready.set()

    async def to_client_when_ready() -> int:
        try:
            await asyncio.wait_for(ready.wait(), PONG_WAIT)
        except TimeoutError:
            log.debug("client did not answer the first ping; relaying anyway", extra={"what": what})
        return await copy_messages(upstream, client)

    try:
        await client.prepare(request)
        if hold_until_pong:
            await client.ping(token)
        else:
            ready.set()
        async with asyncio.TaskGroup() as tg:
            to_kubelet = tg.create_task(copy_messages(client, upstream, on_pong=on_pong), name=f"relay-{what}-to-kubelet")
            to_client = tg.create_task(to_client_when_ready(), name=f"relay-{what}-to-client")
            done, _ = await asyncio.wait((to_kubelet, to_client), return_when=asyncio.FIRST_COMPLETED)
            # one side closed: close the other with its code, which ends the other copy
            first = done.pop()
            code = first.result()
            peer = upstream if first is to_kubelet else client
            if not peer.closed:
                await peer.close(code=code)
            (to_client if first is to_kubelet else to_kubelet).cancel()
    except* (ConnectionResetError, aiohttp.ClientConnectionError):
        log.debug("relay ended by a dropped connection", extra={"what": what})
    finally:
        if not upstream.closed:
            await upstream.close()
        if not client.closed:
            await client.close()
    return client


async def _kubelet_refusal(kubelets: KubeletClient, url: str, params: list[tuple[str, str]]) -> None:
    """Raise the Status the kubelet refuses this stream with, if it does
    (its checks run before it looks for an upgrade)."""
    try:
        async with kubelets.session.get(url, params=params) as plain:
            if plain.status >= 400:
                err = await status_error_from_response(plain)
                # "served over WebSocket" is the kubelet's answer to the plain GET itself
                if "served over WebSocket" not in err.message:
                    raise err
    except (aiohttp.ClientError, OSError) as err:
        raise ServiceUnavailable(f"cannot reach the kubelet at {url} ({err}): is it running?") from None


async def copy_messages(
    source: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
    sink: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
    *,
    on_pong: Callable[[bytes], None] = lambda _data: None,
) -> int:
    """Copy messages until ``source`` closes; returns the close code to pass on.
    A ``source`` without autoping has its pings answered here and its pongs handed to ``on_pong``."""
    while True:
        msg = await source.receive()
        if msg.type == WSMsgType.PING:
            await source.pong(msg.data)
        elif msg.type == WSMsgType.PONG:
            on_pong(msg.data)
        elif msg.type == WSMsgType.BINARY:
            await sink.send_bytes(msg.data)
        elif msg.type == WSMsgType.TEXT:
            await sink.send_str(msg.data)
        elif msg.type == WSMsgType.CLOSE:
            return _sendable(msg.data)
        elif msg.type in (WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR):
            return _sendable(source.close_code)


def _sendable(code: object) -> int:
    """A close code that may go on the wire (1005/1006/1015 are reserved for
    "none received" and may not be sent)."""
    if not isinstance(code, int) or code < 1000 or code in (1005, 1006, 1015) or code >= 5000:
        return 1000
    return code
