"""The cluster DNS server's wire side: queries in, answers out, over UDP and
TCP (dnspython parses and writes the messages).

:class:`DNSAnswerer` answers a query from the current :class:`~k8py.proxy.dns_zone.Zone`
when the name is in the cluster domain, or is a reverse name the zone knows;
every other query is forwarded as it came to the host's resolvers (the
``nameserver`` lines of the host's ``/etc/resolv.conf``, skipping this
server) and the first answer is relayed back. Answers from the zone are
authoritative with a short TTL (5 s, CoreDNS's default); a name that does
not exist is NXDOMAIN, a name without the asked type an empty NOERROR, both
with the zone's SOA in the authority section so that resolvers cache the
negative answer correctly. A UDP answer longer than the client allows (512
bytes, or its EDNS size) is sent truncated (TC) so that it retries on TCP.

:class:`DNSServer` binds the UDP and TCP sockets on one address and port.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from typing import Callable, Sequence

import dns._features

# k8py dns forwards over UDP and TCP only (as CoreDNS' forward plugin does by
# default): without this, dnspython imports its DNS-over-HTTPS client when
# httpx is installed (httpx, httpcore, h2, anyio, trio: some 200 modules,
# 10 MB in every process forked from k8py up's zygote, and 0.2 s of CPU)
dns._features.force("doh", False)

import dns.asyncquery  # noqa: E402
import dns.exception  # noqa: E402
import dns.flags  # noqa: E402
import dns.message  # noqa: E402
import dns.name  # noqa: E402
import dns.rcode  # noqa: E402
import dns.rdataclass  # noqa: E402
import dns.rdatatype  # noqa: E402
import dns.rrset  # noqa: E402

from k8py.proxy.dns_zone import Zone  # noqa: E402

__all__ = ["DNSAnswerer", "DNSServer", "host_nameservers"]

logger = logging.getLogger(__name__)

TTL = 5


def host_nameservers(path: str = "/etc/resolv.conf", *, exclude: Sequence[str] = ()) -> list[str]:
    found: list[str] = []
    try:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 2 and parts[0] == "nameserver" and parts[1] not in exclude:
                    found.append(parts[1])
    except OSError:
        pass
    return found


class DNSAnswerer:
    def __init__(self, zone: Callable[[], Zone], *, upstreams: Sequence[str] = (), forward_timeout: float = 2.0) -> None:
        self._zone = zone
        self.upstreams = list(upstreams)
        self.forward_timeout = forward_timeout
        self.queries = 0
        self.forwarded = 0

    async def answer(self, wire: bytes, *, tcp: bool) -> bytes | None:
        self.queries += 1
        try:
            query = dns.message.from_wire(wire)
        except dns.exception.DNSException:
            return None  # not a DNS message: nothing sane to answer
        if len(query.question) != 1:
            response = dns.message.make_response(query)
            response.set_rcode(dns.rcode.FORMERR)
            return response.to_wire()
        question = query.question[0]
        name = question.name.to_text().lower()
        zone = self._zone()
        if zone.in_domain(name) or name in zone.ptr:
            return self._finish(query, self._local(query, zone, name, question.rdtype), tcp=tcp)
        return await self._forward(query, tcp=tcp)

    def _local(self, query: dns.message.Message, zone: Zone, name: str, rdtype: int) -> dns.message.Message:
        response = dns.message.make_response(query)
        response.flags |= dns.flags.AA
        qname = query.question[0].name
        if not zone.exists(name) and name not in zone.ptr:
            response.set_rcode(dns.rcode.NXDOMAIN)
            response.authority.append(self._soa(zone))
            return response
        if name in zone.cname:
            response.answer.append(dns.rrset.from_text_list(qname, TTL, "IN", "CNAME", [zone.cname[name]]))
            return response
        if rdtype in (dns.rdatatype.A, dns.rdatatype.ANY) and zone.lookup_a(name):
            response.answer.append(dns.rrset.from_text_list(qname, TTL, "IN", "A", zone.lookup_a(name)))
        elif rdtype == dns.rdatatype.SRV and name in zone.srv:
            records = zone.srv[name]
            response.answer.append(dns.rrset.from_text_list(
                qname, TTL, "IN", "SRV", [f"{r.priority} {r.weight} {r.port} {r.target}" for r in records]))
            for target in dict.fromkeys(r.target for r in records):
                ips = zone.lookup_a(target)
                if ips:
                    response.additional.append(dns.rrset.from_text_list(target, TTL, "IN", "A", ips))
        elif rdtype == dns.rdatatype.PTR and name in zone.ptr:
            response.answer.append(dns.rrset.from_text_list(qname, TTL, "IN", "PTR", [zone.ptr[name]]))
        if not response.answer:
            response.authority.append(self._soa(zone))
        return response

    def _soa(self, zone: Zone) -> dns.rrset.RRset:
        return dns.rrset.from_text(zone.domain, TTL, "IN", "SOA",
                                   f"ns.dns.{zone.domain} hostmaster.{zone.domain} 1 7200 1800 86400 {TTL}")

    def _finish(self, query: dns.message.Message, response: dns.message.Message, *, tcp: bool) -> bytes:
        if tcp:
            return response.to_wire()
        limit = max(512, query.payload) if query.edns >= 0 else 512
        try:
            return response.to_wire(max_size=limit)
        except dns.exception.TooBig:
            response.answer.clear()
            response.additional.clear()
            response.flags |= dns.flags.TC
            return response.to_wire()

    async def _forward(self, query: dns.message.Message, *, tcp: bool) -> bytes:
        self.forwarded += 1
        for upstream in self.upstreams:
            try:
                if tcp:
                    reply = await dns.asyncquery.tcp(query, upstream, timeout=self.forward_timeout)
                else:
                    reply = await dns.asyncquery.udp(query, upstream, timeout=self.forward_timeout, ignore_trailing=True)
                return reply.to_wire()
            except (dns.exception.DNSException, OSError) as err:
                logger.debug("upstream resolver failed", extra={"upstream": upstream, "error": str(err)})
        response = dns.message.make_response(query)
        response.set_rcode(dns.rcode.SERVFAIL)
        return response.to_wire()


class _UDP(asyncio.DatagramProtocol):
    def __init__(self, answerer: DNSAnswerer, tasks: set[asyncio.Task[None]]) -> None:
        self.answerer = answerer
        self.tasks = tasks
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        task = asyncio.get_running_loop().create_task(self._reply(data, addr), name="dns-udp-query")
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _reply(self, data: bytes, addr: tuple[str, int]) -> None:
        wire = await self.answerer.answer(data, tcp=False)
        if wire is not None and self.transport is not None:
            self.transport.sendto(wire, addr)


class DNSServer:
    def __init__(self, answerer: DNSAnswerer, *, bind: str, port: int) -> None:
        self.answerer = answerer
        self.bind = bind
        self.port = port
        self._udp: asyncio.DatagramTransport | None = None
        self._tcp: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tcp = await asyncio.start_server(self._tcp_client, self.bind, self.port, reuse_address=True)
        if self.port == 0:
            self.port = self._tcp.sockets[0].getsockname()[1]
        self._udp, _ = await loop.create_datagram_endpoint(lambda: _UDP(self.answerer, self._tasks), local_addr=(self.bind, self.port))

    async def _tcp_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size = struct.unpack("!H", await reader.readexactly(2))[0]
                wire = await self.answerer.answer(await reader.readexactly(size), tcp=True)
                if wire is None:
                    break
                writer.write(struct.pack("!H", len(wire)) + wire)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def stop(self) -> None:
        if self._udp is not None:
            self._udp.close()
        if self._tcp is not None:
            self._tcp.close()
        for task in list(self._tasks):
            task.cancel()
