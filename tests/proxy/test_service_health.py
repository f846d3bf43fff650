"""The proxy's per-Service health check on ``healthCheckNodePort``: a
LoadBalancer Service with ``externalTrafficPolicy: Local`` gets the port from
the API server (node port range), and ``run_proxy`` answers on the node's
address with this node's ready local endpoints — 200 with one, 503 without —
as kube-proxy's service health server does. Real API server, EndpointSlice
controller and proxy; pods are asyncio servers on loopback."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from k8py.client.rest import PatchType
from k8py.client.resources import SERVICES
from k8py.proxy.service_health import body
from tests.proxy.conftest import NS, eventually


async def _health(ip: str, port: int) -> tuple[int, dict[str, str], str]:
    reader, writer = await asyncio.wait_for(asyncio.open_connection(ip, port), 5)
    try:
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: lb\r\nConnection: close\r\n\r\n")
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), 5)
    finally:
        writer.close()
    head, _, text = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, text.decode()


async def test_a_local_load_balancer_service_is_health_checked_on_its_health_check_node_port(cluster):
    client = cluster.client
    await cluster.start_pod("lb-here", {"app": "lb"}, node="node-a")
    await cluster.start_pod("lb-there", {"app": "lb"}, node="node-b")
    svc = await client.create(SERVICES, {"metadata": {"name": "lb"}, "spec": {
        "type": "LoadBalancer", "externalTrafficPolicy": "Local", "selector": {"app": "lb"},
        "ports": [{"name": "web", "port": 80, "targetPort": "http"}]}}, namespace=NS)
    port = svc["spec"]["healthCheckNodePort"]
    assert 30000 <= port <= 32767 and port != svc["spec"]["ports"][0]["nodePort"]

    async def answer(code: int) -> Any:
        got = await _health(cluster.node_address, port)
        return got if got[0] == code else None

    status, headers, text = await eventually(lambda: answer(200), timeout=30)
    assert headers["Content-Type"].startswith("application/json")
    assert headers["X-Load-Balancing-Endpoint-Weight"] == "1"  # the pod on node-b is not counted here
    assert json.loads(text) == {"service": {"namespace": NS, "name": "lb"}, "localEndpoints": 1, "serviceProxyHealthy": True}
    assert text == body((NS, "lb"), 1, True)

    # the local pod turns unready: no local endpoint, 503 (the balancer stops sending here)
    ip = cluster.proxier.table[(NS, "lb", "web")].external_endpoints[0].ip
    await cluster.set_ready("lb-here", ip, False)
    status, headers, text = await eventually(lambda: answer(503), timeout=30)
    assert json.loads(text)["localEndpoints"] == 0 and headers["X-Load-Balancing-Endpoint-Weight"] == "0"

    # Cluster policy: the API server drops the port and the proxy stops answering on it
    await client.patch(SERVICES, NS, "lb", {"spec": {"externalTrafficPolicy": "Cluster"}}, patch_type=PatchType.MERGE)
    assert "healthCheckNodePort" not in (await client.get(SERVICES, NS, "lb"))["spec"]

    async def closed() -> bool:
        try:
            await _health(cluster.node_address, port)
        except ConnectionRefusedError:
            return True
        return False

    assert await eventually(closed, timeout=30)
    assert cluster.proxier.health_checks.serving == {}


async def test_a_requested_health_check_node_port_is_honoured_and_a_taken_one_refused(cluster):
    client = cluster.client
    first = await client.create(SERVICES, {"metadata": {"name": "a"}, "spec": {
        "type": "LoadBalancer", "externalTrafficPolicy": "Local", "selector": {"app": "a"},
        "ports": [{"port": 80}]}}, namespace=NS)
    wanted = first["spec"]["healthCheckNodePort"] + 1 if first["spec"]["healthCheckNodePort"] < 32767 else 30000
    if wanted == first["spec"]["ports"][0]["nodePort"]:
        wanted = wanted + 1 if wanted < 32767 else 30001
    second = await client.create(SERVICES, {"metadata": {"name": "b"}, "spec": {
        "type": "LoadBalancer", "externalTrafficPolicy": "Local", "healthCheckNodePort": wanted, "selector": {"app": "b"},
        "ports": [{"port": 80}]}}, namespace=NS)
    assert second["spec"]["healthCheckNodePort"] == wanted
    from k8py.api.errors import Invalid

    try:
        await client.create(SERVICES, {"metadata": {"name": "c"}, "spec": {
            "type": "LoadBalancer", "externalTrafficPolicy": "Local", "healthCheckNodePort": wanted, "selector": {"app": "c"},
            "ports": [{"port": 80}]}}, namespace=NS)
    except Invalid as err:
        assert f"spec.healthCheckNodePort: Invalid value: {wanted}: provided port is already allocated" in err.message
    else:
        raise AssertionError("a taken healthCheckNodePort was accepted")
    # no local endpoints yet: the proxy answers 503 on both
    for port in (first["spec"]["healthCheckNodePort"], wanted):
        status, _, text = await eventually(lambda p=port: _health(cluster.node_address, p), timeout=30)
        assert status == 503 and json.loads(text)["localEndpoints"] == 0


async def test_the_proxiers_own_healthz_and_livez_on_the_healthz_bind_address(server, client):
    from k8py.client.config import ClientConfig
    from k8py.client.resources import NODES
    from k8py.proxy.app import ProxyOptions, run_proxy

    options = ProxyOptions(node_name="node-h", node_addresses=("127.0.0.1",), mode="userspace", healthz_bind="127.0.0.1:0")
    proxiers: list[Any] = []
    task = asyncio.create_task(run_proxy(ClientConfig(server=server.url), options, on_proxier=proxiers.append), name="proxy")
    try:
        await eventually(lambda: proxiers and options.healthz_port and proxiers[0].synced.is_set(), timeout=30)

        async def get(path: str) -> tuple[int, dict[str, Any]]:
            reader, writer = await asyncio.open_connection("127.0.0.1", options.healthz_port)
            writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            raw = await reader.read()
            writer.close()
            head, _, text = raw.partition(b"\r\n\r\n")
            return int(head.split()[1]), json.loads(text)

        status, healthz = await get("/healthz")
        assert status == 200 and healthz["nodeEligible"] is True and set(healthz) == {"lastUpdated", "currentTime", "nodeEligible"}
        assert healthz["currentTime"].endswith(" +0000 UTC")
        status, livez = await get("/livez")
        assert status == 200 and set(livez) == {"lastUpdated", "currentTime"}
        # the cluster autoscaler marks the node for deletion: not eligible (healthz 503), still live
        await client.create(NODES, {"metadata": {"name": "node-h"}, "spec": {
            "taints": [{"key": "ToBeDeletedByClusterAutoscaler", "value": "1", "effect": "NoSchedule"}]}})

        async def ineligible() -> Any:
            got = await get("/healthz")
            return got if got[0] == 503 else None

        status, healthz = await eventually(ineligible, timeout=30)
        assert healthz["nodeEligible"] is False
        assert (await get("/livez"))[0] == 200
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
