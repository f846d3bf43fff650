"""kube-proxy's behaviour through the userspace backend: a real API server,
the real EndpointSlice controller, ``run_proxy``, and pods that are asyncio
servers on their own loopback addresses."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import pytest

from k8py.client.resources import ENDPOINTS, PODS, SERVICES
from tests.proxy.conftest import NS, eventually, http_get


async def _service(client, name: str, **spec: Any) -> dict[str, Any]:
    body = {"metadata": {"name": name},
            "spec": {"selector": {"app": name}, "ports": [{"name": "web", "port": 80, "targetPort": "http"}], **spec}}
    return await client.create(SERVICES, body, namespace=NS)


async def _answers(ip: str, port: int, n: int) -> list[str]:
    return [await http_get(ip, port) for _ in range(n)]


async def test_the_cluster_ip_reaches_every_ready_pod_and_drops_an_unready_one_at_once(cluster):
    ips = {name: await cluster.start_pod(name, {"app": "web"}) for name in ("web-1", "web-2", "web-3")}
    svc = await _service(cluster.client, "web")
    vip = svc["spec"]["clusterIP"]

    async def all_three():
        return set(await _answers(vip, 80, 6)) == {"web-1", "web-2", "web-3"}

    await eventually(all_three)
    written = time.monotonic()
    await cluster.set_ready("web-2", ips["web-2"], False)

    async def web2_gone():
        return "web-2" not in await _answers(vip, 80, 6)

    await eventually(web2_gone)
    took = time.monotonic() - written
    assert took < 5.0, f"the unready pod kept getting traffic for {took:.2f}s"
    # and it stays out: a long run of requests never reaches it
    assert set(await _answers(vip, 80, 30)) == {"web-1", "web-3"}


async def test_a_service_with_no_ready_endpoint_refuses_connections_at_once(cluster):
    svc = await _service(cluster.client, "empty")
    vip = svc["spec"]["clusterIP"]
    await eventually(lambda: cluster.proxier.generation >= 1)
    started = time.monotonic()
    with pytest.raises(ConnectionRefusedError):
        await http_get(vip, 80)
    assert time.monotonic() - started < 1.0
    ip = await cluster.start_pod("empty-1", {"app": "empty"}, ready=False)
    await asyncio.sleep(0)  # a not-ready pod changes nothing
    with pytest.raises(ConnectionRefusedError):
        await http_get(vip, 80)
    await cluster.set_ready("empty-1", ip, True)
    assert await eventually(lambda: http_get(vip, 80)) == "empty-1"


async def test_terminating_endpoints_serve_only_when_no_ready_one_is_left(cluster):
    await cluster.start_pod("t-1", {"app": "t"}, finalizers=["test/hold"])
    await cluster.start_pod("t-2", {"app": "t"}, finalizers=["test/hold"])
    svc = await _service(cluster.client, "t")
    vip = svc["spec"]["clusterIP"]
    await eventually(lambda: _set_eq(_answers(vip, 80, 4), {"t-1", "t-2"}))
    await cluster.client.delete(PODS, NS, "t-1", grace_period_seconds=30)
    await eventually(lambda: _set_eq(_answers(vip, 80, 6), {"t-2"}))  # ready beats terminating
    await cluster.client.delete(PODS, NS, "t-2", grace_period_seconds=30)
    # both terminating but still serving: traffic goes on rather than being refused
    await eventually(lambda: _set_eq(_answers(vip, 80, 6), {"t-1", "t-2"}))
    for name in ("t-1", "t-2"):
        pod = await cluster.client.get(PODS, NS, name)
        pod["metadata"]["finalizers"] = []
        await cluster.client.update(PODS, pod)


async def _set_eq(coro, expected: set[str]) -> bool:
    return set(await coro) == expected


async def test_session_affinity_client_ip_keeps_a_client_on_one_pod(cluster):
    for name in ("s-1", "s-2", "s-3"):
        await cluster.start_pod(name, {"app": "s"})
    svc = await _service(cluster.client, "s", sessionAffinity="ClientIP",
                         sessionAffinityConfig={"clientIP": {"timeoutSeconds": 60}})
    vip = svc["spec"]["clusterIP"]
    await eventually(lambda: _count_slice_endpoints(cluster, "s", 3))
    answers = await _answers(vip, 80, 12)
    assert len(set(answers)) == 1, answers


async def _count_slice_endpoints(cluster, name: str, n: int) -> bool:
    entry = cluster.proxier.table.get((NS, name, "web"))
    return entry is not None and len(entry.cluster_endpoints) == n


async def test_node_ports_listen_on_the_node_address(cluster):
    await cluster.start_pod("np-1", {"app": "np"})
    svc = await _service(cluster.client, "np", type="NodePort")
    node_port = svc["spec"]["ports"][0]["nodePort"]
    assert 30000 <= node_port <= 32767
    assert await eventually(lambda: http_get(cluster.node_address, node_port)) == "np-1"
    assert await http_get(svc["spec"]["clusterIP"], 80) == "np-1"


async def test_traffic_policy_local_uses_only_this_nodes_endpoints(cluster):
    await cluster.start_pod("l-here", {"app": "l"}, node="node-a")
    await cluster.start_pod("l-there", {"app": "l"}, node="node-b")
    svc = await _service(cluster.client, "l", type="NodePort", internalTrafficPolicy="Local", externalTrafficPolicy="Local")
    await eventually(lambda: _count_all(cluster, "l", 2))
    vip, node_port = svc["spec"]["clusterIP"], svc["spec"]["ports"][0]["nodePort"]
    assert set(await _answers(vip, 80, 6)) == {"l-here"}
    assert set(await _answers(cluster.node_address, node_port, 6)) == {"l-here"}


async def _count_all(cluster, name: str, n: int) -> bool:
    entry = cluster.proxier.table.get((NS, name, "web"))
    return entry is not None and len(entry.all_endpoints) == n


async def test_udp_is_relayed_and_replies_come_back(cluster):
    await cluster.start_pod("u-1", {"app": "u"}, udp=True)
    body = {"metadata": {"name": "u"}, "spec": {"selector": {"app": "u"},
            "ports": [{"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 8080}]}}
    svc = await cluster.client.create(SERVICES, body, namespace=NS)
    vip = svc["spec"]["clusterIP"]
    await eventually(lambda: _count_endpoints_udp(cluster))
    loop = asyncio.get_running_loop()
    replies: asyncio.Queue[bytes] = asyncio.Queue()

    class Client(asyncio.DatagramProtocol):
        def datagram_received(self, data: bytes, addr: Any) -> None:
            replies.put_nowait(data)

    transport, _ = await loop.create_datagram_endpoint(Client, remote_addr=(vip, 53))
    try:
        async def answered():
            transport.sendto(b"ping")
            try:
                return await asyncio.wait_for(replies.get(), 0.5)
            except asyncio.TimeoutError:
                return None

        assert await eventually(answered) == b"u-1:ping"
    finally:
        transport.close()


async def _count_endpoints_udp(cluster) -> bool:
    entry = cluster.proxier.table.get((NS, "u", "dns"))
    return entry is not None and len(entry.cluster_endpoints) == 1


async def test_a_selectorless_service_with_manual_endpoints_carries_traffic(cluster):
    ip = await cluster.start_pod("manual-backend", {"app": "nothing-selects-this"})
    body = {"metadata": {"name": "ext"}, "spec": {"ports": [{"name": "web", "port": 80, "targetPort": 8080}]}}
    svc = await cluster.client.create(SERVICES, body, namespace=NS)
    await cluster.client.create(ENDPOINTS, {"metadata": {"name": "ext"}, "subsets": [
        {"addresses": [{"ip": ip}], "ports": [{"name": "web", "port": 8080, "protocol": "TCP"}]}]}, namespace=NS)
    assert await eventually(lambda: http_get(svc["spec"]["clusterIP"], 80)) == "manual-backend"


async def test_an_endpoint_that_refuses_is_skipped_for_the_next(cluster):
    await cluster.start_pod("r-1", {"app": "r"})
    await cluster.start_pod("r-2", {"app": "r"})
    svc = await _service(cluster.client, "r")
    vip = svc["spec"]["clusterIP"]
    await eventually(lambda: _set_eq(_answers(vip, 80, 4), {"r-1", "r-2"}))
    cluster.stop_pod_servers("r-1")  # the process died; its endpoint is still listed
    assert set(await _answers(vip, 80, 10)) == {"r-2"}


async def test_the_api_server_proxies_to_pods_and_services(server, cluster):
    import aiohttp

    await cluster.start_pod("px-1", {"app": "px"})
    await _service(cluster.client, "px")
    base = f"{server.url}/api/v1/namespaces/{NS}"
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{base}/pods/px-1:8080/proxy/") as r:
            assert r.status == 200 and await r.text() == "px-1"
        async with http.get(f"{base}/pods/px-1:http/proxy/some/path?x=1") as r:
            assert r.status == 200 and await r.text() == "px-1"
        # services/proxy reads the Endpoints object, which the Endpoints controller writes
        async with http.get(f"{base}/services/px:web/proxy/") as r:
            body = await r.text()
            assert r.status == 503 and 'no endpoints available for service \\"px\\"' in body, body
        await cluster.client.create(ENDPOINTS, {"metadata": {"name": "px"}, "subsets": [{
            "addresses": [{"ip": (await cluster.client.get(PODS, NS, "px-1"))["status"]["podIP"]}],
            "ports": [{"name": "web", "port": 8080}]}]}, namespace=NS)
        async with http.get(f"{base}/services/px:web/proxy/") as r:
            assert r.status == 200 and await r.text() == "px-1"
        async with http.get(f"{base}/services/px/proxy/") as r:
            assert r.status == 200 and await r.text() == "px-1"


async def test_external_ips_and_load_balancer_ingress_ips_carry_traffic_at_the_service_port(cluster):
    import random

    external = f"127.129.{random.randint(0, 255)}.{random.randint(2, 254)}"
    balanced = f"127.130.{random.randint(0, 255)}.{random.randint(2, 254)}"
    await cluster.start_pod("ext-1", {"app": "ext"})
    await _service(cluster.client, "ext", externalIPs=[external])
    assert await eventually(lambda: http_get(external, 80)) == "ext-1"
    lb = await _service(cluster.client, "ext-lb", type="LoadBalancer", selector={"app": "ext"})
    lb["status"] = {"loadBalancer": {"ingress": [{"ip": balanced}]}}  # what a cloud controller writes
    await cluster.client.update_status(SERVICES, lb)
    assert await eventually(lambda: http_get(balanced, 80)) == "ext-1"
    # the last endpoint gone: refused at once on the external IP as on the cluster IP
    await cluster.client.delete(PODS, NS, "ext-1", grace_period_seconds=0)

    async def refused() -> bool:
        try:
            await http_get(external, 80)
        except ConnectionRefusedError:
            return True
        return False

    assert await eventually(refused)


async def test_load_balancer_source_ranges_admit_only_their_clients(cluster):
    import random

    balanced = f"127.130.{random.randint(0, 255)}.{random.randint(2, 254)}"
    await cluster.start_pod("fw-1", {"app": "fw"})
    lb = await _service(cluster.client, "fw", type="LoadBalancer", loadBalancerSourceRanges=["127.131.0.0/16"])
    lb["status"] = {"loadBalancer": {"ingress": [{"ip": balanced}]}}
    await cluster.client.update_status(SERVICES, lb)

    async def get_from(source: str) -> str:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(balanced, 80, local_addr=(source, 0)), 5)
        try:
            writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            await writer.drain()
            raw = await asyncio.wait_for(reader.read(), 5)
        finally:
            writer.close()
        if not raw:
            raise ConnectionResetError("closed without an answer")
        return raw.split(b"\r\n\r\n", 1)[1].decode()

    inside = f"127.131.{random.randint(0, 255)}.{random.randint(2, 254)}"
    assert await eventually(lambda: get_from(inside)) == "fw-1"
    try:
        await get_from("127.0.0.1")
    except (ConnectionResetError, ConnectionRefusedError):
        pass
    else:
        raise AssertionError("a client outside loadBalancerSourceRanges was let in")
    # the cluster IP is not filtered
    assert await http_get(lb["spec"]["clusterIP"], 80) == "fw-1"


async def test_a_cluster_ip_port_held_by_another_process_is_retried_without_another_change(cluster):
    svc = await _service(cluster.client, "held")
    vip = svc["spec"]["clusterIP"]
    blocker = socket.socket()
    blocker.bind((vip, 80))
    blocker.listen()
    try:
        await cluster.start_pod("held-1", {"app": "held"})
        # the proxier's sync cannot listen there: it says so and will try again by itself
        await eventually(lambda: cluster.proxier.metrics.sync_failures._value.get() >= 1)
        assert cluster.proxier.synced.is_set()  # the rest of its table is in force
    finally:
        blocker.close()
    # nothing in the API changes from here: only the proxier's retry can open the listener
    assert await eventually(lambda: http_get(vip, 80)) == "held-1"
