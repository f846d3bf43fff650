"""Dropping a Service port's new connections from userspace, as a netfilter DROP does.

Upstream drops (does not reject) a connection to a Service whose ``Local``
traffic policy leaves no endpoint on this node while other nodes have some
("has no local endpoints"): the client's SYN is never answered, it retransmits
and its connect times out — unlike a port with no endpoints at all, which is
refused at once. The userspace backend has no packet filter, so it gets the
same effect from the kernel:

- **TCP**: a listening socket whose accept queue is kept full and never
  accepted from. Linux drops a SYN for a listener with a full accept queue
  (``LINUX_MIB_LISTENOVERFLOWS``) without any answer — no SYN-ACK, no RST —
  which is exactly what a client sees from a DROP. The queue is filled by
  the backend's own "plug" connections (backlog 1, plugged until the
  listener's ``TCP_INFO`` says its queue is over the backlog).
- **UDP**: a bound socket that reads and discards every datagram, so the
  kernel sends no ICMP port-unreachable (which a REJECT would).

Departure, documented: a client that was already half-way through a
handshake when the policy changed may still complete it (a real DROP would
also let through nothing new); and the drop is per listening address, so it
cannot be applied per client (``loadBalancerSourceRanges`` still resets).

Invariants: a blackhole owns its listener and plugs and releases all of them
on ``close``; when it closes, SYNs the client retransmits reach whatever
listener (or none) the next sync leaves there, as a rule change would.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct

__all__ = ["TCPBlackhole", "UDPBlackhole", "accept_queue"]

logger = logging.getLogger(__name__)

_TCP_INFO_LEN = 104
_MAX_PLUGS = 8
PLUG_TIMEOUT = 2.0


def accept_queue(sock: socket.socket) -> tuple[int, int]:
    """A listening socket's (queued connections, backlog), from ``TCP_INFO``
    (``tcpi_unacked`` / ``tcpi_sacked`` hold them for a listener)."""
    raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_LEN)
    queued, backlog = struct.unpack_from("II", raw, 24)
    return queued, backlog


class TCPBlackhole:
    """A TCP address whose new connections are silently dropped."""

    def __init__(self, address: str, port: int) -> None:
        self.address, self.port = address, port
        self._listener: socket.socket | None = None
        self._plugs: list[socket.socket] = []

    async def open(self) -> None:
        """Bind, listen and fill the accept queue; raises ``OSError`` when the address cannot be bound."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((self.address, self.port))
            listener.listen(1)
            self._listener = listener
            await self._plug()
        except BaseException:
            self.close()
            raise

    async def _plug(self) -> None:
        assert self._listener is not None
        loop = asyncio.get_running_loop()
        for _ in range(_MAX_PLUGS):
            queued, backlog = accept_queue(self._listener)
            if queued > backlog:
                return
            plug = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            plug.setblocking(False)
            self._plugs.append(plug)
            try:
                await asyncio.wait_for(loop.sock_connect(plug, (self.address, self.port)), PLUG_TIMEOUT)
            except (OSError, asyncio.TimeoutError):
                break  # the kernel dropped this one: the queue is full already
        queued, backlog = accept_queue(self._listener)
        if queued <= backlog:
            logger.warning("could not fill a dropping listener's queue; connections may be accepted and hang",
                           extra={"listen": f"{self.address}:{self.port}", "queued": queued, "backlog": backlog})

    def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        for plug in self._plugs:
            plug.close()
        self._plugs.clear()


class _Discard(asyncio.DatagramProtocol):
    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        pass  # dropped: no reply and no ICMP port-unreachable


class UDPBlackhole:
    """A UDP address whose datagrams are read and discarded."""

    def __init__(self, address: str, port: int) -> None:
        self.address, self.port = address, port
        self._transport: asyncio.DatagramTransport | None = None

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(_Discard, local_addr=(self.address, self.port), family=socket.AF_INET)
        self._transport = transport

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None
