"""UserspaceBackend: kube-proxy's forwarding as asyncio listeners (no root).

For every service port with usable endpoints the backend listens on each
cluster IP at the Service's port, and — for NodePort and LoadBalancer
Services — on each of the node's addresses at the node port, and on each
external IP (``spec.externalIPs``, load-balancer ingress IPs) at the
Service's port (any address in 127.0.0.0/8 can be bound without configuring
it; another address must be one of the host's); a load-balancer IP with
``loadBalancerSourceRanges`` resets clients outside them (upstream drops). A connection is relayed
to an endpoint that a :class:`~k8py.proxy.balancer.Balancer` picks
(:mod:`.tcp_relay`, :mod:`.udp_relay`).

Invariants:

- a listener exists exactly while its service port has a usable endpoint:
  when the last one goes the listener is closed, so a new connection is
  refused at once (upstream's REJECT) rather than accepted and hung;
- a port that a ``Local`` traffic policy leaves without endpoints on this
  node while other nodes have some is a :mod:`.blackhole` instead: new
  connections are dropped (SYNs unanswered, datagrams discarded), as
  upstream's "has no local endpoints" DROP;
- a listener reads the *current* table entry at each new connection, so an
  endpoint removed by a sync is never picked afterwards (connections already
  relayed to it carry on until either side closes, as upstream's conntrack);
- a listener that cannot be bound (the address is taken by another process)
  is logged once; the rest of the table is still applied, and the sync ends
  in :class:`~k8py.proxy.backend.SyncIncomplete`, so that the proxier syncs
  again after a backoff and the listener is retried then.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import logging
import socket
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from k8py.proxy.backend import SyncIncomplete
from k8py.proxy.balancer import Balancer
from k8py.proxy.blackhole import TCPBlackhole, UDPBlackhole
from k8py.proxy.service_table import Endpoint, ServicePort, ServicePortKey
from k8py.proxy.tcp_relay import ClientSide
from k8py.proxy.udp_relay import UDPListener

__all__ = ["UserspaceBackend"]

logger = logging.getLogger(__name__)

ListenKey = tuple[str, int, str]  # (address, port, protocol)


@dataclass
class _Listener:
    service: ServicePortKey
    external: bool
    balancer: Balancer
    server: asyncio.base_events.Server | None = None
    udp: UDPListener | None = None
    connections: int = 0
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    allowed: tuple[ipaddress.IPv4Network, ...] = ()  # the clients a load-balancer IP accepts (empty: any)


def _allowed(client_ip: str, ranges: tuple[ipaddress.IPv4Network, ...]) -> bool:
    try:
        address = ipaddress.ip_address(client_ip)
    except ValueError:
        return False
    return any(address in r for r in ranges)


async def _open_soon(hole: TCPBlackhole | UDPBlackhole) -> None:
    """Open ``hole``; a UDP listener closed in the same sync releases its socket
    only on a later turn of the loop, so an address in use is retried a few turns."""
    for _ in range(5):
        try:
            return await hole.open()
        except OSError as err:
            if err.errno != errno.EADDRINUSE:
                raise
        await asyncio.sleep(0)
    await hole.open()


class UserspaceBackend:
    def __init__(self, *, udp_idle_timeout: float = 60.0, on_connection=None) -> None:  # type: ignore[no-untyped-def]
        self._table: Mapping[ServicePortKey, ServicePort] = {}
        self._listeners: dict[ListenKey, _Listener] = {}
        self._blackholes: dict[ListenKey, TCPBlackhole | UDPBlackhole] = {}
        self._failed: set[ListenKey] = set()
        self.udp_idle_timeout = udp_idle_timeout
        self._on_connection = on_connection
        self._lock = asyncio.Lock()

    @property
    def listening(self) -> list[ListenKey]:
        return sorted(self._listeners)

    @property
    def dropping(self) -> list[ListenKey]:
        return sorted(self._blackholes)

    def _endpoints(self, listener: _Listener) -> tuple[Endpoint, ...]:
        entry = self._table.get(listener.service)
        if entry is None:
            return ()
        return entry.external_endpoints if listener.external else entry.cluster_endpoints

    def _chooser(self, listener: _Listener):  # type: ignore[no-untyped-def]
        def choose(client_ip: str, exclude: set[tuple[str, int]]) -> Endpoint | None:
            if listener.allowed and not _allowed(client_ip, listener.allowed):
                return None  # outside loadBalancerSourceRanges: reset (upstream drops)
            return listener.balancer.pick(client_ip, self._endpoints(listener), exclude)
        return choose

    async def sync(self, table: Mapping[ServicePortKey, ServicePort], node_addresses: Sequence[str]) -> None:
        async with self._lock:
            self._table = table
            wanted: dict[ListenKey, tuple[ServicePort, bool]] = {}
            firewalls: dict[ListenKey, tuple[ipaddress.IPv4Network, ...]] = {}
            drops: dict[ListenKey, ServicePort] = {}
            for entry in table.values():
                cluster = [(ip, entry.port, entry.protocol) for ip in entry.cluster_ips]
                external = [(a, entry.node_port, entry.protocol) for a in node_addresses if entry.node_port]
                external += [(a, entry.port, entry.protocol) for a in entry.external_ips + entry.load_balancer_ips]
                for keys, endpoints, is_external in ((cluster, entry.cluster_endpoints, False), (external, entry.external_endpoints, True)):
                    for key in keys:
                        if endpoints:
                            wanted.setdefault(key, (entry, is_external))
                        elif entry.endpoints_elsewhere:
                            drops.setdefault(key, entry)
                if entry.external_endpoints:
                    ranges = tuple(ipaddress.IPv4Network(r) for r in entry.source_ranges)
                    for address in entry.load_balancer_ips:
                        firewalls[(address, entry.port, entry.protocol)] = ranges
            drops = {k: v for k, v in drops.items() if k not in wanted}
            for key in [k for k in self._listeners if k not in wanted or self._listeners[k].service != wanted[k][0].key]:
                self._close(key)
            for key in [k for k in self._blackholes if k not in drops]:
                self._blackholes.pop(key).close()
                logger.info("stopped dropping a service port", extra={"listen": f"{key[0]}:{key[1]}/{key[2]}"})
            for key, (entry, external) in wanted.items():
                listener = self._listeners.get(key)
                if listener is not None:
                    listener.external = external
                    listener.allowed = firewalls.get(key, ())
                    listener.balancer.configure(affinity=entry.session_affinity, affinity_timeout=entry.affinity_timeout)
                    listener.balancer.prune()
                    if listener.udp is not None:
                        listener.udp.expire()
                    continue
                await self._open(key, entry, external, firewalls.get(key, ()))
            for key, entry in drops.items():
                if key not in self._blackholes:
                    await self._open_blackhole(key, entry)
            self._failed &= set(wanted) | set(drops)
            missing = sorted(k for k in self._failed if k not in self._listeners and k not in self._blackholes and k[2] in ("TCP", "UDP"))
            if missing:
                raise SyncIncomplete("cannot listen on " + ", ".join(f"{a}:{p}/{proto}" for a, p, proto in missing[:5])
                                     + (f" and {len(missing) - 5} more" if len(missing) > 5 else ""))

    async def _open_blackhole(self, key: ListenKey, entry: ServicePort) -> None:
        address, port, protocol = key
        if protocol not in ("TCP", "UDP"):
            return
        hole = TCPBlackhole(address, port) if protocol == "TCP" else UDPBlackhole(address, port)
        try:
            await _open_soon(hole)
        except OSError as err:
            if key not in self._failed:
                logger.warning("cannot drop a service port's traffic; will retry", extra={
                    "service": str(entry), "listen": f"{address}:{port}/{protocol}", "reason": str(err)})
                self._failed.add(key)
            return
        self._failed.discard(key)
        self._blackholes[key] = hole
        logger.info("dropping a service port: no local endpoints", extra={"service": str(entry), "listen": f"{address}:{port}/{protocol}"})

    async def _open(self, key: ListenKey, entry: ServicePort, external: bool, allowed: tuple[ipaddress.IPv4Network, ...] = ()) -> None:
        address, port, protocol = key
        listener = _Listener(entry.key, external, Balancer(affinity=entry.session_affinity, affinity_timeout=entry.affinity_timeout),
                             allowed=allowed)
        loop = asyncio.get_running_loop()
        try:
            if protocol == "TCP":
                listener.server = await loop.create_server(
                    lambda: ClientSide(self._chooser(listener), listener.tasks, self._on_connection),
                    address, port, reuse_address=True, backlog=1024)
            elif protocol == "UDP":
                udp = UDPListener(self._chooser(listener), lambda: {ep.address for ep in self._endpoints(listener)},
                                  idle_timeout=self.udp_idle_timeout)
                await loop.create_datagram_endpoint(lambda: udp, local_addr=(address, port), family=socket.AF_INET)
                listener.udp = udp
            else:
                if key not in self._failed:
                    logger.warning("protocol not supported by the userspace proxy", extra={"service": str(entry), "protocol": protocol})
                    self._failed.add(key)
                return
        except OSError as err:
            if key not in self._failed:
                reason = "address in use" if err.errno == errno.EADDRINUSE else str(err)
                logger.warning("cannot listen for a service port; will retry", extra={"service": str(entry), "listen": f"{address}:{port}/{protocol}", "reason": reason})
                self._failed.add(key)
            return
        self._failed.discard(key)
        self._listeners[key] = listener
        logger.info("listening for a service port", extra={"service": str(entry), "listen": f"{address}:{port}/{protocol}"})

    def _close(self, key: ListenKey) -> None:
        listener = self._listeners.pop(key)
        if listener.server is not None:
            listener.server.close()
        if listener.udp is not None:
            listener.udp.close()
        logger.info("stopped listening for a service port", extra={"listen": f"{key[0]}:{key[1]}/{key[2]}"})

    async def close(self) -> None:
        async with self._lock:
            for key in list(self._listeners):
                self._close(key)
            for hole in self._blackholes.values():
                hole.close()
            self._blackholes.clear()
            self._table = {}
