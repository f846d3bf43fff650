"""The nftables backend's conntrack cleanup for UDP (and SCTP) Services.

The filters (:func:`stale_flows`) are checked as values; then, as root, the
real thing: the backend's rules DNAT a UDP client on the host to an endpoint,
the endpoint is replaced by another, and the client — still sending from the
same port, so its conntrack entry would pin it to the old endpoint — is
answered by the new one at once."""

from __future__ import annotations

import asyncio
import random
import socket
import subprocess
from typing import AsyncIterator

import pytest

from k8py.proxy.nftables.conntrack import Flow, stale_flows
from k8py.proxy.service_table import Endpoint, ServicePort
from tests.support.tools import POD_NETWORK_MISSING, pod_network_missing

KEY = ("d", "dns", "dns")


def _port(protocol: str, *endpoints: Endpoint, node_port: int = 0, external: tuple[str, ...] = ()) -> ServicePort:
    return ServicePort("d", "dns", "dns", protocol, 53, ("10.2.0.10",), node_port=node_port, external_ips=external,
                       cluster_endpoints=endpoints, external_endpoints=endpoints, all_endpoints=endpoints)


A, B = Endpoint("10.1.1.2", 8053), Endpoint("10.1.1.3", 8053)


def test_a_removed_udp_endpoint_has_its_flows_to_every_service_address_deleted() -> None:
    old = {KEY: _port("UDP", A, B, node_port=30053, external=("192.0.2.9",))}
    new = {KEY: _port("UDP", B, node_port=30053, external=("192.0.2.9",))}
    assert stale_flows(old, new) == [
        Flow("UDP", "", 30053, "10.1.1.2", 8053),
        Flow("UDP", "10.2.0.10", 53, "10.1.1.2", 8053),
        Flow("UDP", "192.0.2.9", 53, "10.1.1.2", 8053),
    ]
    assert Flow("UDP", "10.2.0.10", 53, "10.1.1.2", 8053).args() == [
        "-D", "-p", "udp", "--orig-dst", "10.2.0.10", "--orig-port-dst", "53", "--reply-src", "10.1.1.2", "--reply-port-src", "8053"]


def test_a_deleted_service_and_sctp_ports_are_cleaned_and_tcp_is_left_alone() -> None:
    assert stale_flows({KEY: _port("SCTP", A)}, {}) == [Flow("SCTP", "10.2.0.10", 53, "10.1.1.2", 8053)]
    assert stale_flows({KEY: _port("TCP", A)}, {}) == []
    assert stale_flows({KEY: _port("UDP", A)}, {KEY: _port("UDP", A)}) == []  # nothing changed


def test_a_port_that_gains_its_first_endpoint_has_all_its_flows_deleted() -> None:
    assert stale_flows({KEY: _port("UDP")}, {KEY: _port("UDP", A, node_port=30053)}) == [
        Flow("UDP", "", 30053), Flow("UDP", "10.2.0.10", 53)]
    assert stale_flows({}, {KEY: _port("UDP", A)}) == [Flow("UDP", "10.2.0.10", 53)]


class _Echo(asyncio.DatagramProtocol):
    def __init__(self, name: str) -> None:
        self.name = name.encode()
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        assert self.transport is not None
        self.transport.sendto(self.name + b":" + data, addr)


@pytest.fixture
async def echoes() -> AsyncIterator[list[tuple[str, int]]]:
    loop = asyncio.get_running_loop()
    transports, addresses = [], []
    for name in ("a", "b"):
        ip = f"127.{random.randint(100, 127)}.{random.randint(0, 255)}.{random.randint(2, 254)}"
        transport, _ = await loop.create_datagram_endpoint(lambda n=name: _Echo(n), local_addr=(ip, 0))
        transports.append(transport)
        addresses.append(transport.get_extra_info("sockname")[:2])
    yield addresses
    for transport in transports:
        transport.close()


def _free_vip() -> str:
    routes = subprocess.run(["ip", "-4", "route", "show", "table", "all"], capture_output=True, text=True).stdout
    while True:
        vip = f"10.{random.randint(100, 250)}.{random.randint(0, 255)}.{random.randint(2, 254)}"
        if vip.rsplit(".", 1)[0] + "." not in routes:
            return vip


async def test_a_udp_client_moves_to_the_new_endpoint_when_its_endpoint_is_replaced(echoes) -> None:
    why = pod_network_missing()
    if why:
        pytest.skip(f"{POD_NETWORK_MISSING}: {why}")
    from k8py.proxy.nftables.backend import NftablesBackend

    (a_ip, a_port), (b_ip, b_port) = echoes
    vip = _free_vip()
    backend = NftablesBackend("conntrack-test", table=f"k8py-ct-{random.randint(0, 10**9)}")

    def service(endpoint: Endpoint) -> dict:
        eps = (endpoint,)
        return {KEY: ServicePort("d", "dns", "dns", "UDP", 53, (vip,), cluster_endpoints=eps, external_endpoints=eps, all_endpoints=eps)}

    client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    client.settimeout(5)
    try:
        await backend.sync(service(Endpoint(a_ip, a_port)), [])
        client.connect((vip, 53))

        def ask() -> bytes:
            client.send(b"ping")
            return client.recv(100)

        assert await asyncio.to_thread(ask) == b"a:ping"
        assert await asyncio.to_thread(ask) == b"a:ping"  # the flow is pinned to a
        await backend.sync(service(Endpoint(b_ip, b_port)), [])
        # a still answers if asked: only the flushed conntrack entry moves the client
        assert await asyncio.to_thread(ask) == b"b:ping"
    finally:
        client.close()
        await backend.close()
        subprocess.run(["conntrack", "-D", "-p", "udp", "--orig-dst", vip], capture_output=True)
