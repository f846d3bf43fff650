"""The userspace proxy drops, not refuses, a connection to a Service whose
``Local`` traffic policy leaves no endpoint on this node while another node
has one (upstream's "has no local endpoints" DROP): the SYN is never answered
and a datagram gets no ICMP port-unreachable. With no endpoint anywhere it
still refuses at once; with a local endpoint it carries traffic again."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from k8py.client.resources import PODS, SERVICES
from k8py.proxy.blackhole import TCPBlackhole, accept_queue
from tests.proxy.conftest import NS, eventually, http_get

QUIET = 2.0  # how long a dropped client is watched for any answer


async def _connect_outcome(ip: str, port: int) -> str:
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(ip, port), QUIET)
    except asyncio.TimeoutError:
        return "no answer"
    except ConnectionRefusedError:
        return "refused"
    writer.close()
    return "connected"


async def _udp_outcome(ip: str, port: int) -> str:
    loop = asyncio.get_running_loop()
    outcome: asyncio.Future[str] = loop.create_future()

    class Client(asyncio.DatagramProtocol):
        def datagram_received(self, data: bytes, addr: Any) -> None:
            if not outcome.done():
                outcome.set_result("answered")

        def error_received(self, exc: Exception) -> None:
            if not outcome.done():
                outcome.set_result("refused" if isinstance(exc, ConnectionRefusedError) else repr(exc))

    transport, _ = await loop.create_datagram_endpoint(Client, remote_addr=(ip, port))
    try:
        for _ in range(3):
            transport.sendto(b"ping")
            try:
                return await asyncio.wait_for(asyncio.shield(outcome), QUIET / 3)
            except asyncio.TimeoutError:
                continue
        return "no answer"
    finally:
        transport.close()


def _dropping(cluster: Any, key: tuple[str, int, str]) -> bool:
    return key in cluster.proxier.backend.dropping


async def test_a_local_policy_service_without_a_local_endpoint_drops_tcp(cluster):
    await cluster.start_pod("far", {"app": "far"}, node="node-b")
    body = {"metadata": {"name": "far"}, "spec": {
        "selector": {"app": "far"}, "type": "NodePort", "internalTrafficPolicy": "Local", "externalTrafficPolicy": "Local",
        "ports": [{"name": "web", "port": 80, "targetPort": "http"}]}}
    svc = await cluster.client.create(SERVICES, body, namespace=NS)
    vip, node_port = svc["spec"]["clusterIP"], svc["spec"]["ports"][0]["nodePort"]
    await eventually(lambda: _dropping(cluster, (vip, 80, "TCP")) and _dropping(cluster, (cluster.node_address, node_port, "TCP")))
    assert await _connect_outcome(vip, 80) == "no answer"
    assert await _connect_outcome(cluster.node_address, node_port) == "no answer"
    # a local endpoint: traffic flows again on both
    await cluster.start_pod("near", {"app": "far"}, node="node-a")
    assert await eventually(lambda: http_get(vip, 80)) == "near"
    assert await http_get(cluster.node_address, node_port) == "near"
    assert not cluster.proxier.backend.dropping
    # no endpoint anywhere: refused at once, as before
    for name in ("near", "far"):
        await cluster.client.delete(PODS, NS, name, grace_period_seconds=0)

    async def refused() -> bool:
        return await _connect_outcome(vip, 80) == "refused"

    assert await eventually(refused)
    assert not cluster.proxier.backend.dropping


async def test_a_local_policy_udp_service_without_a_local_endpoint_discards_datagrams(cluster):
    await cluster.start_pod("ufar", {"app": "ufar"}, node="node-b", udp=True)
    body = {"metadata": {"name": "ufar"}, "spec": {"selector": {"app": "ufar"}, "internalTrafficPolicy": "Local",
                                                  "ports": [{"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 8080}]}}
    svc = await cluster.client.create(SERVICES, body, namespace=NS)
    vip = svc["spec"]["clusterIP"]
    await eventually(lambda: _dropping(cluster, (vip, 53, "UDP")))
    assert await _udp_outcome(vip, 53) == "no answer"
    await cluster.client.delete(PODS, NS, "ufar", grace_period_seconds=0)

    async def refused() -> bool:
        return await _udp_outcome(vip, 53) == "refused"

    assert await eventually(refused)


async def test_a_blackhole_keeps_its_accept_queue_full_and_releases_the_port():
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    hole = TCPBlackhole("127.0.0.1", port)
    await hole.open()
    try:
        queued, backlog = accept_queue(hole._listener)  # type: ignore[arg-type]
        assert queued > backlog
        assert await _connect_outcome("127.0.0.1", port) == "no answer"
    finally:
        hole.close()
    with pytest.raises(ConnectionRefusedError):
        await asyncio.open_connection("127.0.0.1", port)
