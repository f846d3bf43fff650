"""Cluster IPs and node ports claimed in the store: no double allocation
under concurrent creates or across a restart, explicit values honoured or
refused with upstream's messages, releases on delete."""

from __future__ import annotations

import asyncio
import ipaddress

import pytest

from k8py.api.errors import Invalid
from k8py.client.config import ClientConfig
from k8py.client.resources import SERVICES
from k8py.client.rest import RestClient
from tests.support.servers import ServerThread, sqlite_storage

CIDR = "127.200.7.0/26"  # 62 usable addresses: small enough to fill


def _svc(name: str, **spec) -> dict:
    return {"metadata": {"name": name}, "spec": {"ports": [{"port": 80}], **spec}}


@pytest.fixture
def server(tmp_path):
    with ServerThread(sqlite_storage(str(tmp_path / "data")), service_cidr=CIDR, service_node_port_range="30000-30009") as s:
        yield s


async def test_concurrent_creates_never_share_an_address_and_a_full_range_is_refused(server):
    async with RestClient(ClientConfig(server=server.url)) as client:
        kube = await client.get(SERVICES, "default", "kubernetes")
        assert kube["spec"]["clusterIP"] == "127.200.7.1"
        results = await asyncio.gather(*(client.create(SERVICES, _svc(f"s{i}"), namespace="default") for i in range(61)),
                                       return_exceptions=True)
        ips = [r["spec"]["clusterIP"] for r in results if isinstance(r, dict)]
        assert len(ips) == 61 and len(set(ips) | {"127.200.7.1"}) == 62
        assert all(ipaddress.ip_address(ip) in ipaddress.ip_network(CIDR) for ip in ips)
        with pytest.raises(Invalid) as err:
            await client.create(SERVICES, _svc("full"), namespace="default")
        assert "range is full" in err.value.message
        # a delete gives the address back
        freed = ips[0]
        await client.delete(SERVICES, "default", "s0")

        async def reusable():
            while True:
                try:
                    return await client.create(SERVICES, _svc("again", clusterIP=freed), namespace="default")
                except Invalid:
                    await asyncio.sleep(0.05)

        again = await asyncio.wait_for(reusable(), 20)
        assert again["spec"]["clusterIPs"] == [freed]


async def test_requested_addresses_are_honoured_or_refused_as_upstream(server):
    async with RestClient(ClientConfig(server=server.url)) as client:
        ok = await client.create(SERVICES, _svc("a", clusterIP="127.200.7.20"), namespace="default")
        assert ok["spec"]["clusterIPs"] == ["127.200.7.20"]
        with pytest.raises(Invalid) as err:
            await client.create(SERVICES, _svc("b", clusterIP="127.200.7.20"), namespace="default")
        assert "provided IP is already allocated" in err.value.message
        with pytest.raises(Invalid) as err:
            await client.create(SERVICES, _svc("c", clusterIP="127.201.0.5"), namespace="default")
        assert "is not in the valid range. The range of valid IPs is 127.200.7.0/26" in err.value.message
        headless = await client.create(SERVICES, _svc("h", clusterIP="None"), namespace="default")
        assert headless["spec"]["clusterIPs"] == ["None"]
        # a dry run claims nothing
        dry = await client.create(SERVICES, _svc("d", clusterIP="127.200.7.21"), namespace="default", dry_run=True)
        assert dry["spec"]["clusterIP"] == "127.200.7.21"
        real = await client.create(SERVICES, _svc("d", clusterIP="127.200.7.21"), namespace="default")
        assert real["spec"]["clusterIP"] == "127.200.7.21"


async def test_node_ports_come_from_the_range_and_are_never_shared(server):
    async with RestClient(ClientConfig(server=server.url)) as client:
        first = await client.create(SERVICES, _svc("np1", type="NodePort"), namespace="default")
        port = first["spec"]["ports"][0]["nodePort"]
        assert 30000 <= port <= 30009
        with pytest.raises(Invalid) as err:
            await client.create(SERVICES, {"metadata": {"name": "np2"}, "spec": {"type": "NodePort",
                                "ports": [{"port": 80, "nodePort": port}]}}, namespace="default")
        assert f"spec.ports[0].nodePort: Invalid value: {port}: provided port is already allocated" in err.value.message
        with pytest.raises(Invalid) as err:
            await client.create(SERVICES, {"metadata": {"name": "np3"}, "spec": {"type": "NodePort",
                                "ports": [{"port": 80, "nodePort": 31000}]}}, namespace="default")
        assert "provided port is not in the valid range. The range of valid ports is 30000-30009" in err.value.message
        # the failed creates did not keep their cluster IPs or ports
        rest = await asyncio.gather(*(client.create(SERVICES, _svc(f"n{i}", type="NodePort"), namespace="default")
                                      for i in range(9)))
        ports = {s["spec"]["ports"][0]["nodePort"] for s in rest} | {port}
        assert ports == set(range(30000, 30010))


async def test_claims_survive_a_restart(tmp_path):
    storage = sqlite_storage(str(tmp_path / "data"))
    with ServerThread(storage, service_cidr=CIDR) as first:
        async with RestClient(ClientConfig(server=first.url)) as client:
            kept = await client.create(SERVICES, _svc("kept", clusterIP="127.200.7.30"), namespace="default")
    assert kept["spec"]["clusterIP"] == "127.200.7.30"
    with ServerThread(storage, service_cidr=CIDR) as second:
        async with RestClient(ClientConfig(server=second.url)) as client:
            with pytest.raises(Invalid):
                await client.create(SERVICES, _svc("thief", clusterIP="127.200.7.30"), namespace="default")


async def test_type_changes_on_update_allocate_and_free_as_upstream(server):
    async with RestClient(ClientConfig(server=server.url)) as client:
        svc = await client.create(SERVICES, _svc("t"), namespace="default")
        assert "nodePort" not in svc["spec"]["ports"][0]
        svc["spec"]["type"] = "NodePort"
        svc = await client.update(SERVICES, svc)
        port = svc["spec"]["ports"][0]["nodePort"]
        assert 30000 <= port <= 30009
        # another Service cannot take it
        with pytest.raises(Invalid):
            await client.create(SERVICES, {"metadata": {"name": "u"}, "spec": {"type": "NodePort",
                                "ports": [{"port": 80, "nodePort": port}]}}, namespace="default")
        # back to ClusterIP: the node port is dropped and free again
        svc["spec"]["type"] = "ClusterIP"
        svc = await client.update(SERVICES, svc)
        assert "nodePort" not in svc["spec"]["ports"][0]
        taken = await client.create(SERVICES, {"metadata": {"name": "u"}, "spec": {"type": "NodePort",
                                    "ports": [{"port": 80, "nodePort": port}]}}, namespace="default")
        assert taken["spec"]["ports"][0]["nodePort"] == port
        # to ExternalName and back: the cluster IP is freed, then a new one allocated
        ip = svc["spec"]["clusterIP"]
        svc["spec"] = {"type": "ExternalName", "externalName": "db.example.com", "ports": svc["spec"]["ports"]}
        svc = await client.update(SERVICES, svc)
        assert not svc["spec"].get("clusterIP")
        reuse = await client.create(SERVICES, _svc("reuse", clusterIP=ip), namespace="default")
        assert reuse["spec"]["clusterIP"] == ip
        svc["spec"] = {"type": "ClusterIP", "ports": [{"port": 80}]}
        svc = await client.update(SERVICES, svc)
        assert svc["spec"]["clusterIP"] not in ("", None, ip)


@pytest.mark.etcd
async def test_two_api_servers_on_one_etcd_never_hand_out_the_same_address():
    from k8py.storage.etcd import EtcdStorage
    from tests.support.etcd import fresh_prefix, session_etcd

    urls = session_etcd().client_urls
    prefix = fresh_prefix()

    def storage():
        return EtcdStorage(urls, prefix=prefix, compaction_interval=None)

    with ServerThread(storage, service_cidr=CIDR, service_node_port_range="30000-30019") as a, \
            ServerThread(storage, service_cidr=CIDR, service_node_port_range="30000-30019") as b:
        async with RestClient(ClientConfig(server=a.url)) as ca, RestClient(ClientConfig(server=b.url)) as cb:
            created = await asyncio.gather(*(
                (ca if i % 2 else cb).create(SERVICES, _svc(f"s{i}", type="NodePort"), namespace="default") for i in range(20)))
    ips = [s["spec"]["clusterIP"] for s in created]
    ports = [s["spec"]["ports"][0]["nodePort"] for s in created]
    assert len(set(ips)) == 20 and "127.200.7.1" not in ips
    assert sorted(ports) == list(range(30000, 30020))


async def test_a_local_load_balancer_gets_a_health_check_node_port_kept_and_freed_as_upstream(server):
    async with RestClient(ClientConfig(server=server.url)) as client:
        lb = await client.create(SERVICES, _svc("lb", type="LoadBalancer", externalTrafficPolicy="Local"), namespace="default")
        node_port, health = lb["spec"]["ports"][0]["nodePort"], lb["spec"]["healthCheckNodePort"]
        assert 30000 <= health <= 30009 and health != node_port
        # the health check port is a node port like any other: nobody else gets it
        with pytest.raises(Invalid, match="provided port is already allocated"):
            await client.create(SERVICES, {"metadata": {"name": "thief"}, "spec": {
                "type": "NodePort", "ports": [{"port": 80, "nodePort": health}]}}, namespace="default")
        # an update that leaves it out keeps it
        lb["spec"].pop("healthCheckNodePort")
        lb = await client.update(SERVICES, lb)
        assert lb["spec"]["healthCheckNodePort"] == health
        # Cluster traffic policy: no health check port, and it is free again
        lb["spec"]["externalTrafficPolicy"] = "Cluster"
        lb = await client.update(SERVICES, lb)
        assert "healthCheckNodePort" not in lb["spec"]
        taken = await client.create(SERVICES, {"metadata": {"name": "taker"}, "spec": {
            "type": "NodePort", "ports": [{"port": 80, "nodePort": health}]}}, namespace="default")
        assert taken["spec"]["ports"][0]["nodePort"] == health
        # only a Local LoadBalancer may have one
        with pytest.raises(Invalid) as err:
            await client.create(SERVICES, _svc("np", type="NodePort", healthCheckNodePort=30005), namespace="default")
        assert "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'" in err.value.message
        # a requested one is honoured
        free = next(p for p in range(30000, 30010) if p not in (node_port, health))
        asked = await client.create(SERVICES, {"metadata": {"name": "asked"}, "spec": {
            "type": "LoadBalancer", "externalTrafficPolicy": "Local", "healthCheckNodePort": free,
            "ports": [{"port": 80, "nodePort": next(p for p in range(30009, 29999, -1) if p not in (node_port, health, free))}]}},
            namespace="default")
        assert asked["spec"]["healthCheckNodePort"] == free


async def test_a_load_balancer_without_node_ports_gets_only_the_ones_it_asks_for(server):
    """allocateLoadBalancerNodePorts: false — no port is picked, a requested one is honoured (and held)."""
    async with RestClient(ClientConfig(server=server.url)) as client:
        bare = await client.create(SERVICES, {"metadata": {"name": "lb-bare"}, "spec": {
            "type": "LoadBalancer", "allocateLoadBalancerNodePorts": False, "ports": [{"port": 80}]}}, namespace="default")
        assert "nodePort" not in bare["spec"]["ports"][0] and bare["spec"]["allocateLoadBalancerNodePorts"] is False
        asked = await client.create(SERVICES, {"metadata": {"name": "lb-asked"}, "spec": {
            "type": "LoadBalancer", "allocateLoadBalancerNodePorts": False,
            "ports": [{"name": "a", "port": 80, "nodePort": 30003}, {"name": "b", "port": 81}]}}, namespace="default")
        assert [p.get("nodePort") for p in asked["spec"]["ports"]] == [30003, None]
        with pytest.raises(Invalid) as err:
            await client.create(SERVICES, {"metadata": {"name": "np"}, "spec": {"type": "NodePort",
                                "ports": [{"port": 80, "nodePort": 30003}]}}, namespace="default")
        assert "provided port is already allocated" in err.value.message
        # the default (true) still allocates
        lb = await client.create(SERVICES, _svc("lb", type="LoadBalancer"), namespace="default")
        assert 30000 <= lb["spec"]["ports"][0]["nodePort"] <= 30009
