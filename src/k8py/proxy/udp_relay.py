"""Relaying UDP to endpoints (upstream's userspace UDP proxy).

UDP has no connections, so the listener keeps a *session* per client
address: the first datagram from a client picks an endpoint and opens a
connected socket to it; later datagrams from that client go the same way,
and every reply from the endpoint is sent back to the client from the
Service's address. A session idle for ``idle_timeout`` seconds is closed
(checked as datagrams arrive and by :meth:`UDPListener.expire`), and one
whose endpoint is no longer usable is dropped at the next datagram, so the
session map holds only clients active within the timeout.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable

from k8py.proxy.service_table import Endpoint

__all__ = ["UDPListener"]

logger = logging.getLogger(__name__)


class _Upstream(asyncio.DatagramProtocol):
    def __init__(self, listener: "UDPListener", client: tuple[str, int]) -> None:
        self.listener = listener
        self.client = client
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        if self.listener.transport is not None:
            self.listener.transport.sendto(data, self.client)

    def error_received(self, exc: Exception) -> None:
        logger.debug("UDP endpoint error", extra={"client": self.client, "error": str(exc)})


class UDPListener(asyncio.DatagramProtocol):
    def __init__(self, choose: Callable[[str, set[tuple[str, int]]], Endpoint | None],
                 usable: Callable[[], set[tuple[str, int]]], *, idle_timeout: float = 60.0,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._choose = choose
        self._usable = usable
        self.idle_timeout = idle_timeout
        self._monotonic = monotonic
        self.transport: asyncio.DatagramTransport | None = None
        self._sessions: dict[tuple[str, int], tuple[Endpoint, _Upstream, float]] = {}
        self._opening: dict[tuple[str, int], list[bytes]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        now = self._monotonic()
        session = self._sessions.get(addr)
        if session is not None:
            endpoint, upstream, seen = session
            if now - seen <= self.idle_timeout and endpoint.address in self._usable() and upstream.transport is not None:
                self._sessions[addr] = (endpoint, upstream, now)
                upstream.transport.sendto(data)
                return
            self._drop(addr)
        if addr in self._opening:
            self._opening[addr].append(data)
            return
        endpoint = self._choose(addr[0], set())
        if endpoint is None:
            return  # no endpoint: the datagram is dropped
        self._opening[addr] = [data]
        task = asyncio.get_running_loop().create_task(self._open(addr, endpoint), name=f"proxy-udp-{addr[0]}:{addr[1]}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _open(self, client: tuple[str, int], endpoint: Endpoint) -> None:
        loop = asyncio.get_running_loop()
        try:
            transport, upstream = await loop.create_datagram_endpoint(lambda: _Upstream(self, client), remote_addr=endpoint.address)
        except OSError as err:
            logger.debug("cannot open a UDP session", extra={"endpoint": endpoint.address, "error": str(err)})
            self._opening.pop(client, None)
            return
        self._sessions[client] = (endpoint, upstream, self._monotonic())
        for data in self._opening.pop(client, []):
            transport.sendto(data)

    def _drop(self, client: tuple[str, int]) -> None:
        session = self._sessions.pop(client, None)
        if session is not None and session[1].transport is not None:
            session[1].transport.close()

    def expire(self) -> None:
        now = self._monotonic()
        usable = self._usable()
        for client, (endpoint, _, seen) in list(self._sessions.items()):
            if now - seen > self.idle_timeout or endpoint.address not in usable:
                self._drop(client)

    def close(self) -> None:
        for client in list(self._sessions):
            self._drop(client)
        for task in self._tasks:
            task.cancel()
        if self.transport is not None:
            self.transport.close()
