"""``/exec`` and ``/attach`` for a runtime that streams them itself (CRI: containerd's streaming server).

Upstream's kubelet hands the runtime's streaming URL on (redirect or proxy)
and the API server translates kubectl's WebSocket to the runtime's SPDY.
Here the API server speaks WebSocket (``v5``/``v4.channel.k8s.io``) to the
kubelet, so the kubelet is the translator: the runtime session
(:class:`~k8py.kubelet.runtime.protocols.RemoteStream`, SPDY to containerd)
on one side, the client's WebSocket on the other.

Order of a session, as :mod:`.remote_command` (the process runtime's):

1. the checks and the runtime's ``Exec``/``Attach`` (and the connection to
   its streaming server) happen *before* the upgrade, so a refusal is an HTTP
   ``Status`` the API server hands on;
2. after the upgrade an empty message on the lowest output channel says
   "the stream is up";
3. stdin messages go to the runtime's stdin stream; v5's ``0xFF 0x00`` closes
   it (a FIN: the command reads EOF); resize messages go to its resize stream;
4. when the runtime has ended stdout and stderr, its ``Status`` (the exit
   code, as it wrote it) goes out on the error channel and the socket closes.
   A client that goes away closes the runtime session: containerd closes the
   command's stdin and lets it run on (upstream's kubelet on containerd does
   the same: kubernetes/kubernetes#89031, containerd/cri#1256; tested in
   tests/kubelet/cri/test_kubelet_cri_streams_e2e), where the process
   runtime kills it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

from aiohttp import WSMsgType, web

from k8py.api import stream_channels as ch
from k8py.kubelet.runtime.protocols import NotFoundError, RemoteStream, RuntimeErrorStatus
from k8py.kubelet.server.containers import KubeletError, running_attempt
from k8py.kubelet.server.remote_command import _error, _flags, _open, _protocol, send_status
from k8py.kubelet.server_context import ServerContext

__all__ = ["remote_exec_handler", "remote_attach_handler"]

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def remote_exec_handler(ctx: ServerContext) -> Handler:
    return _handler(ctx, attach=False)


def remote_attach_handler(ctx: ServerContext) -> Handler:
    return _handler(ctx, attach=True)


def _handler(ctx: ServerContext, *, attach: bool) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        ns, pod, container = (request.match_info[k] for k in ("namespace", "pod", "container"))
        command = request.query.getall("command", [])
        try:
            stdin, stdout, stderr, tty = _flags(request)
            if not attach and not command:
                raise KubeletError(400, "you must specify at least one command for the container")
            protocol = _protocol(request)
            attempt = await running_attempt(ctx, ns, pod, container)
            flags = dict(stdin=stdin, stdout=stdout, stderr=stderr, tty=tty)
            try:
                if attach:
                    remote = await ctx.runtime.attach_stream(attempt.id, **flags)  # type: ignore[attr-defined]
                else:
                    remote = await ctx.runtime.exec_stream(attempt.id, command, **flags)  # type: ignore[attr-defined]
            except NotFoundError:
                raise KubeletError(404, f'container not found ("{container}")') from None
            except RuntimeErrorStatus as err:
                raise KubeletError(500, f'container "{container}" in pod "{pod}": {err.message}') from None
        except KubeletError as err:
            return _error(err)
        ws: web.WebSocketResponse | None = None
        try:
            ws = await _open(request, protocol, ch.STDOUT if stdout else ch.STDERR if stderr and not tty else ch.ERROR)
            await _relay(ws, remote, protocol)
        except* ConnectionError:
            log.debug("%s client went away", "attach" if attach else "exec", extra={"pod": f"{ns}/{pod}", "container": container})
        finally:
            await remote.close()
            if ws is not None and not ws.closed:
                await ws.close()
        return ws if ws is not None else web.Response(status=500)

    return handler


async def _from_client(ws: web.WebSocketResponse, remote: RemoteStream, protocol: str) -> None:
    """The client's messages until its socket closes."""
    async for msg in ws:
        # the official Python client sends str stdin as TEXT messages (channel as a character)
        data = msg.data.encode() if msg.type == WSMsgType.TEXT else msg.data if msg.type == WSMsgType.BINARY else b""
        if not data:
            continue
        channel, payload = data[0], data[1:]
        if channel == ch.STDIN and payload:
            await remote.write_stdin(payload)
        elif channel == ch.RESIZE:
            size = ch.parse_resize(payload)
            if size is not None:
                await remote.resize(*size)
        elif channel == ch.CLOSE and protocol == ch.V5 and payload[:1] == bytes((ch.STDIN,)):
            await remote.close_stdin()


async def _relay(ws: web.WebSocketResponse, remote: RemoteStream, protocol: str) -> None:
    async def to_client() -> None:
        async for channel, data in remote.output():
            await ws.send_bytes(ch.frame(channel, data))

    async with asyncio.TaskGroup() as tg:
        output = tg.create_task(to_client(), name="cri-stream-output")
        client = tg.create_task(_from_client(ws, remote, protocol), name="cri-stream-client")
        done, _ = await asyncio.wait((output, client), return_when=asyncio.FIRST_COMPLETED)
        if client in done:
            output.cancel()  # the client went away: the runtime session closes (finally above)
            return
        status = await remote.status()
        client.cancel()
    await send_status(ws, protocol, status)
    await ws.close()
