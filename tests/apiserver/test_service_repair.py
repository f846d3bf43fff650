"""The repair loops over Service allocations: the inconsistency is made
directly in the store (as a crash between the claim and the Service's write
would leave it), then the running server is watched putting it right —
missing claims re-marked with upstream's Events, leaked claims freed only
after the grace period and passes, claims of deleted Services handed over,
duplicates reported."""

from __future__ import annotations

import asyncio
import re
import time

import orjson
import pytest

from k8py.client.config import ClientConfig
from k8py.client.resources import EVENTS, SERVICES
from k8py.client.rest import RestClient
from k8py.api.errors import Invalid
from tests.support.kube import Kubectl
from tests.support.servers import ServerThread, sqlite_storage

CIDR = "127.200.9.0/26"
IPS = "/registry/ranges/serviceips/"
PORTS = "/registry/ranges/servicenodeports/"


def _svc(name: str, **spec) -> dict:
    return {"metadata": {"name": name}, "spec": {"ports": [{"port": 80}], **spec}}


@pytest.fixture
def repairing(tmp_path):
    """A server whose repair loop runs every 0.1 s and frees leaks older than 1 s."""
    with ServerThread(sqlite_storage(str(tmp_path / "data")), service_cidr=CIDR, service_node_port_range="30000-30009",
                      service_repair_interval=0.1, service_repair_leak_grace=1.0) as s:
        yield s


@pytest.fixture
def manual(tmp_path):
    """A server whose repair passes only run when the test says."""
    with ServerThread(sqlite_storage(str(tmp_path / "data")), service_cidr=CIDR, service_node_port_range="30000-30009",
                      service_repair_interval=0, service_repair_leak_grace=30.0) as s:
        yield s


def _claim(server, prefix: str, item: str) -> dict | None:
    kv = server.call(server.server.storage.get(prefix + item))
    return None if kv is None else orjson.loads(kv.value)


async def _repair_event(client: RestClient, reason: str, name: str, timeout: float = 30.0) -> dict:
    """The repair Event on Service ``name``, from a watch."""
    async def wait() -> dict:
        listed = await client.list(EVENTS, "default")
        for event in listed["items"]:
            if event.get("reason") == reason and event["regarding"]["name"] == name:
                return event
        async for change in client.watch(EVENTS, "default", resource_version=listed["metadata"]["resourceVersion"]):
            event = change.object
            if change.type == "ADDED" and event.get("reason") == reason and event["regarding"]["name"] == name:
                return event
        raise AssertionError("watch ended")

    return await asyncio.wait_for(wait(), timeout)


async def test_a_service_whose_cluster_ip_and_node_port_lost_their_claims_gets_them_back(repairing, tmp_path):
    async with RestClient(ClientConfig(server=repairing.url)) as client:
        svc = await client.create(SERVICES, _svc("web", type="NodePort"), namespace="default")
        ip, port = svc["spec"]["clusterIP"], svc["spec"]["ports"][0]["nodePort"]
        # the crash: the claims are gone while the Service stays
        repairing.call(repairing.server.storage.delete(IPS + ip))
        repairing.call(repairing.server.storage.delete(PORTS + str(port)))
        event = await _repair_event(client, "ClusterIPNotAllocated", "web")
        assert event["note"] == f"Cluster IP [IPv4]:{ip} is not allocated; repairing"
        assert event["type"] == "Warning" and event["reportingController"] == "ipallocator-repair-controller"
        assert event["regarding"]["uid"] == svc["metadata"]["uid"] and event["action"] == "ClusterIPAllocation"
        port_event = await _repair_event(client, "PortNotAllocated", "web")
        assert port_event["note"] == f"Port {port} is not allocated; repairing"
        assert port_event["reportingController"] == "portallocator-repair-controller"
        assert _claim(repairing, IPS, ip)["uid"] == svc["metadata"]["uid"]
        assert _claim(repairing, PORTS, str(port))["uid"] == svc["metadata"]["uid"]
        # re-marked, so nobody else gets them ...
        with pytest.raises(Invalid, match="provided IP is already allocated"):
            await client.create(SERVICES, _svc("thief", clusterIP=ip), namespace="default")
        # ... and the Service's deletion frees them again
        await client.delete(SERVICES, "default", "web")
        deadline = time.monotonic() + 30
        while _claim(repairing, IPS, ip) is not None:
            assert time.monotonic() < deadline, "the re-marked claim was not freed with its Service"
            await asyncio.sleep(0.05)
        # repaired once: the Event is not written again at every pass
        events = await client.list(EVENTS, "default")
        assert sum(e.get("reason") == "ClusterIPNotAllocated" for e in events["items"]) == 1
        # and kubectl shows it as upstream's does
        shown = (await asyncio.to_thread(Kubectl(repairing.url, str(tmp_path / "home")).run, "get", "events")).stdout
        assert re.search(rf"Warning\s+ClusterIPNotAllocated\s+service/web\s+Cluster IP \[IPv4\]:{re.escape(ip)} is not allocated; repairing",
                         shown), shown


async def test_a_leaked_claim_is_freed_after_the_grace_period_and_its_address_handed_out_again(repairing):
    storage = repairing.server.storage
    leaked_ip, leaked_port = "127.200.9.40", "30007"
    for prefix, item in ((IPS, leaked_ip), (PORTS, leaked_port)):
        owner = {"namespace": "default", "name": "died-before-stored", "uid": "uid-of-nothing", "claimedAt": time.time()}
        repairing.call(storage.create(prefix + item, orjson.dumps(owner)))
    async with RestClient(ClientConfig(server=repairing.url)) as client:
        with pytest.raises(Invalid, match="provided IP is already allocated"):
            await client.create(SERVICES, _svc("early", clusterIP=leaked_ip), namespace="default")
        started = time.monotonic()
        while _claim(repairing, IPS, leaked_ip) is not None or _claim(repairing, PORTS, leaked_port) is not None:
            assert time.monotonic() - started < 30, "the leaked claims were never freed"
            await asyncio.sleep(0.05)
        assert time.monotonic() - started >= 0.5  # not before the grace period (1 s from the claim)
        svc = await client.create(SERVICES, {"metadata": {"name": "late"}, "spec": {
            "type": "NodePort", "clusterIP": leaked_ip, "ports": [{"port": 80, "nodePort": int(leaked_port)}]}},
            namespace="default")
        assert svc["spec"]["clusterIP"] == leaked_ip
        # the running loop leaves a claim that is in use alone
        await asyncio.sleep(0.5)
        assert _claim(repairing, IPS, leaked_ip)["uid"] == svc["metadata"]["uid"]


async def test_a_leak_is_flagged_first_and_freed_only_when_old_enough_after_three_passes(manual):
    storage, repair = manual.server.storage, manual.server.service_repair
    old = {"namespace": "default", "name": "gone", "uid": "uid-gone", "claimedAt": time.time() - 3600}
    young = {**old, "claimedAt": time.time()}
    manual.call(storage.create(IPS + "127.200.9.50", orjson.dumps(old)))
    manual.call(storage.create(IPS + "127.200.9.51", orjson.dumps(young)))
    first = manual.call(repair.run_once())
    assert sorted(first.flagged) == ["127.200.9.50", "127.200.9.51"] and first.freed == []
    second = manual.call(repair.run_once())
    assert second.freed == []
    third = manual.call(repair.run_once())
    assert third.freed == ["127.200.9.50"] and third.flagged == ["127.200.9.51"]
    assert _claim(manual, IPS, "127.200.9.50") is None
    # still young after any number of passes: kept (its Service may be on its way into the store)
    for _ in range(3):
        manual.call(repair.run_once())
    assert _claim(manual, IPS, "127.200.9.51")["uid"] == "uid-gone"
    # the kubernetes Service's own claim was never judged a leak
    assert _claim(manual, IPS, "127.200.9.1") is not None


async def test_a_claim_of_a_deleted_service_is_handed_to_the_service_using_the_address(manual):
    async with RestClient(ClientConfig(server=manual.url)) as client:
        svc = await client.create(SERVICES, _svc("heir"), namespace="default")
        ip = svc["spec"]["clusterIP"]
        stale = {"namespace": "default", "name": "heir", "uid": "uid-of-a-deleted-heir", "claimedAt": 0}
        kv = manual.call(manual.server.storage.get(IPS + ip))
        manual.call(manual.server.storage.update(IPS + ip, orjson.dumps(stale), expected_revision=kv.mod_revision))
        report = manual.call(manual.server.service_repair.run_once())
        assert report.taken_over == [ip] and report.remarked == []
        assert _claim(manual, IPS, ip)["uid"] == svc["metadata"]["uid"]


async def test_two_services_on_one_address_and_one_outside_the_range_are_reported_on_the_losers(manual):
    storage = manual.server.storage
    async with RestClient(ClientConfig(server=manual.url)) as client:
        keeper = await client.create(SERVICES, _svc("keeper"), namespace="default")
        ip = keeper["spec"]["clusterIP"]
        # Services written straight into the store: one sharing the address, one outside the range
        for name, address in (("copy", ip), ("stray", "10.0.0.7")):
            twin = {"apiVersion": "v1", "kind": "Service",
                    "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                                 "creationTimestamp": "2030-01-01T00:00:00Z"},
                    "spec": {"clusterIP": address, "clusterIPs": [address], "ports": [{"port": 80}], "type": "ClusterIP"}}
            manual.call(storage.create(f"/registry/services/default/{name}", orjson.dumps(twin)))
        report = manual.call(manual.server.service_repair.run_once())
        assert ip in report.conflicts and "10.0.0.7" in report.conflicts
        assert _claim(manual, IPS, ip)["uid"] == keeper["metadata"]["uid"]
        assert _claim(manual, IPS, "10.0.0.7") is None
        dup = await _repair_event(client, "ClusterIPAlreadyAllocated", "copy")
        assert dup["note"] == f"Cluster IP [IPv4]:{ip} was assigned to multiple services; please recreate service"
        out = await _repair_event(client, "ClusterIPOutOfRange", "stray")
        assert out["note"] == f"Cluster IP [IPv4]:10.0.0.7 is not within the configured Service CIDR {CIDR}; please recreate service"
        events = await client.list(EVENTS, "default")
        assert not any(e["regarding"]["name"] == "keeper" for e in events["items"])
        # a repeat is counted in the Event's series, not written again
        manual.call(manual.server.service_repair.run_once())
        again = await client.get(EVENTS, "default", dup["metadata"]["name"])
        assert again["series"]["count"] == 2
        events = await client.list(EVENTS, "default")
        assert sum(e.get("reason") == "ClusterIPAlreadyAllocated" for e in events["items"]) == 1
