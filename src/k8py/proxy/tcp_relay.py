"""Relaying one TCP connection to an endpoint, in asyncio protocols.

The client's connection is accepted paused; :func:`connect_upstream` dials
the endpoints the balancer picks, moving to the next one when a dial is
refused or times out (an endpoint that died a moment before the proxy heard
of it), and resets the client (RST, as a REJECT would) when none answers.
Once connected, two :class:`_Pipe` protocols write straight into each
other's transport — no task per direction and no copies beyond asyncio's
own buffer — with flow control both ways: when one side's write buffer
fills (``pause_writing``), reading from the other side stops until it
drains. Half-closes are passed on (``write_eof``) and the pair closes when
both directions are done or either side is lost.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
from typing import Callable

from k8py.proxy.service_table import Endpoint

__all__ = ["ClientSide", "DIAL_TIMEOUT"]

logger = logging.getLogger(__name__)

DIAL_TIMEOUT = 3.0
MAX_DIALS = 4


class _Pipe(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.peer: _Pipe | None = None
        self.eof = False
        self.pending: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        peer = self.peer
        if peer is None or peer.transport is None:
            self.pending.append(data)
        else:
            peer.transport.write(data)

    def eof_received(self) -> bool:
        self.eof = True
        peer = self.peer
        if peer is None or peer.transport is None:
            return True
        if peer.eof:
            peer.transport.close()
            return False
        if peer.transport.can_write_eof():
            peer.transport.write_eof()
        return True

    def pause_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None and not self.peer.transport.is_closing():
            self.peer.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()


class ClientSide(_Pipe):
    """The accepted client connection; dials an endpoint when it arrives."""

    def __init__(self, choose: Callable[[str, set[tuple[str, int]]], Endpoint | None], tasks: set[asyncio.Task[None]],
                 on_connected: Callable[[], None] | None = None) -> None:
        super().__init__()
        self._choose = choose
        self._tasks = tasks
        self._on_connected = on_connected

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        transport.pause_reading()  # type: ignore[attr-defined]
        peer = transport.get_extra_info("peername")
        client_ip = peer[0] if peer else ""
        task = asyncio.get_running_loop().create_task(self._dial(client_ip), name=f"proxy-dial-{client_ip}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _dial(self, client_ip: str) -> None:
        loop = asyncio.get_running_loop()
        tried: set[tuple[str, int]] = set()
        for _ in range(MAX_DIALS):
            if self.transport is None or self.transport.is_closing():
                return
            endpoint = self._choose(client_ip, tried)
            if endpoint is None:
                break
            tried.add(endpoint.address)
            upstream = _Pipe()
            upstream.peer = self
            try:
                await asyncio.wait_for(loop.create_connection(lambda: upstream, endpoint.ip, endpoint.port), DIAL_TIMEOUT)
            except (OSError, asyncio.TimeoutError) as err:
                logger.debug("endpoint refused a connection; trying the next", extra={"endpoint": endpoint.address, "error": str(err)})
                continue
            self.peer = upstream
            for chunk in upstream.pending:
                self.transport.write(chunk)
            upstream.pending.clear()
            if self.transport.is_closing():
                upstream.transport.close()  # type: ignore[union-attr]
                return
            self.transport.resume_reading()
            if self._on_connected is not None:
                self._on_connected()
            return
        reset(self.transport)


def reset(transport: asyncio.BaseTransport | None) -> None:
    """Close with a RST (what a client sees from a REJECT), not a graceful FIN."""
    if transport is None or transport.is_closing():
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    transport.abort()  # type: ignore[attr-defined]
