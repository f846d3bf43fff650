"""The cluster DNS server (``run_dns``) answering real queries (dnspython as
the client) from a real API server's Services and EndpointSlices (the real
EndpointSlice controller writes them)."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import random
from typing import Any, AsyncIterator

import dns.asyncquery
import dns.message
import dns.rcode
import dns.rdatatype
import dns.reversename
import dns.rrset
import pytest

from k8py.client.config import ClientConfig
from k8py.client.resources import ENDPOINTS, SERVICES
from k8py.controllers.controller_manager import ControllerManager
from k8py.proxy.app import DNSOptions, run_dns
from tests.proxy.conftest import NS, Cluster, _running, eventually, random_pod_ip


class _Upstream(asyncio.DatagramProtocol):
    """A stand-in for the host's resolver (the machine has no network): it
    answers every A query with 127.9.9.9."""

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def datagram_received(self, data: bytes, addr: Any) -> None:
        query = dns.message.from_wire(data)
        response = dns.message.make_response(query)
        response.answer.append(dns.rrset.from_text(query.question[0].name, 30, "IN", "A", "127.9.9.9"))
        self.transport.sendto(response.to_wire(), addr)


@pytest.fixture
async def dns_cluster(server, client) -> AsyncIterator[tuple[Cluster, Any]]:
    loop = asyncio.get_running_loop()
    upstream_ip = f"127.129.{random.randint(0, 255)}.{random.randint(2, 254)}"
    upstream, _ = await loop.create_datagram_endpoint(_Upstream, local_addr=(upstream_ip, 53))
    cidr = ipaddress.ip_network(server.server.config.service_cidr)
    dns_ip = str(cidr[10])
    servers: list[Any] = []
    manager = ControllerManager(client, controllers=["endpointslice", "endpointslicemirroring"])
    options = DNSOptions(bind=dns_ip, port=0, upstreams=(upstream_ip,))
    async with _running(manager.run(), "controller-manager"):
        await asyncio.wait_for(manager.started.wait(), 30)
        async with _running(run_dns(ClientConfig(server=server.url), options, on_serving=lambda url, s: servers.append(s)), "dns"):
            await eventually(lambda: servers)
            c = Cluster(client, "")
            try:
                yield c, servers[0]
            finally:
                c.close()
                upstream.close()


async def _query(server: Any, name: str, rdtype: str = "A", *, tcp: bool = False) -> dns.message.Message:
    q = dns.message.make_query(name, rdtype)
    if tcp:
        return await dns.asyncquery.tcp(q, server.bind, port=server.port, timeout=2)
    return await dns.asyncquery.udp(q, server.bind, port=server.port, timeout=2)


def _values(response: dns.message.Message, rdtype: str = "A") -> list[str]:
    return sorted(r.to_text() for rrset in response.answer if rrset.rdtype == dns.rdatatype.from_text(rdtype) for r in rrset)


async def test_service_names_answer_a_srv_ptr_and_unknown_names_nxdomain(dns_cluster):
    cluster, server = dns_cluster
    svc = await cluster.client.create(SERVICES, {"metadata": {"name": "web"}, "spec": {
        "selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}, namespace=NS)
    vip = svc["spec"]["clusterIP"]

    async def resolved():
        return _values(await _query(server, "web.default.svc.cluster.local")) == [vip]

    await eventually(resolved)
    for tcp in (False, True):
        assert _values(await _query(server, "web.default.svc.cluster.local.", tcp=tcp)) == [vip]
    srv = await _query(server, "_http._tcp.web.default.svc.cluster.local", "SRV")
    assert _values(srv, "SRV") == ["0 100 80 web.default.svc.cluster.local."]
    ptr = await _query(server, dns.reversename.from_address(vip).to_text(), "PTR")
    assert _values(ptr, "PTR") == ["web.default.svc.cluster.local."]
    aaaa = await _query(server, "web.default.svc.cluster.local", "AAAA")
    assert aaaa.rcode() == dns.rcode.NOERROR and not aaaa.answer and aaaa.authority
    missing = await _query(server, "nope.default.svc.cluster.local")
    assert missing.rcode() == dns.rcode.NXDOMAIN and missing.authority[0].rdtype == dns.rdatatype.SOA
    kube = await _query(server, "kubernetes.default.svc.cluster.local")
    assert len(_values(kube)) == 1
    # a pod's dashed-IP name
    assert _values(await _query(server, "127-100-0-7.default.pod.cluster.local")) == ["127.100.0.7"]
    # names outside the cluster go to the host's resolver
    assert _values(await _query(server, "example.org")) == ["127.9.9.9"]


async def test_headless_services_answer_each_ready_pod_and_statefulset_hostnames(dns_cluster):
    cluster, server = dns_cluster
    await cluster.client.create(SERVICES, {"metadata": {"name": "db"}, "spec": {
        "clusterIP": "None", "selector": {"app": "db"}, "ports": [{"name": "pg", "port": 5432, "targetPort": "http"}]}}, namespace=NS)
    ips = {}
    for i in range(2):
        name = f"db-{i}"
        ips[name] = await _start_named_pod(cluster, name, {"app": "db"}, hostname=name, subdomain="db")
    unready = await cluster.start_pod("db-x", {"app": "db"}, ready=False)

    async def two():
        return _values(await _query(server, "db.default.svc.cluster.local")) == sorted(ips.values())

    await eventually(two)
    assert unready not in _values(await _query(server, "db.default.svc.cluster.local"))
    assert _values(await _query(server, "db-0.db.default.svc.cluster.local")) == [ips["db-0"]]
    srv = await _query(server, "_pg._tcp.db.default.svc.cluster.local", "SRV")
    targets = sorted(r.target.to_text() for rrset in srv.answer for r in rrset)
    assert targets == ["db-0.db.default.svc.cluster.local.", "db-1.db.default.svc.cluster.local."]
    assert {r.port for rrset in srv.answer for r in rrset} == {8080}
    assert sorted(r.to_text() for rrset in srv.additional for r in rrset) == sorted(ips.values())
    ptr = await _query(server, dns.reversename.from_address(ips["db-1"]).to_text(), "PTR")
    assert _values(ptr, "PTR") == ["db-1.db.default.svc.cluster.local."]


async def _start_named_pod(cluster: Cluster, name: str, labels: dict[str, str], **spec: Any) -> str:
    from k8py.client.resources import PODS

    ip = random_pod_ip()
    body = {"metadata": {"name": name, "labels": labels},
            "spec": {"nodeName": "node-a", **spec, "containers": [{"name": "c", "image": "db", "ports": [{"name": "http", "containerPort": 8080}]}]}}
    await cluster.client.create(PODS, body, namespace=NS)
    await cluster.set_ready(name, ip, True)
    return ip


async def test_the_dns_server_advertises_itself_as_kube_dns(dns_cluster):
    cluster, server = dns_cluster
    svc = await eventually(lambda: _try_get(cluster.client, SERVICES, "kube-dns"))
    assert svc["spec"]["clusterIP"] == server.bind
    assert svc["metadata"]["labels"]["k8s-app"] == "kube-dns"
    assert svc["metadata"]["labels"]["service.kubernetes.io/service-proxy-name"]
    ep = await _try_get(cluster.client, ENDPOINTS, "kube-dns")
    assert ep["subsets"][0]["addresses"] == [{"ip": server.bind}]


async def _try_get(client, resource, name: str):
    from k8py.api.errors import NotFound

    with contextlib.suppress(NotFound):
        return await client.get(resource, "kube-system", name)
    return None
