"""Simulated nodes watch only bound pods, register each Node Ready in one write, and create its Lease unread.

A pod being scheduled is no kubelet's business: the shared pod informer's
``spec.nodeName!=`` selector keeps unbound pods out (a third of the pod events
at a Deployment's start), and the server sends a pod as ADDED once it is bound,
so it still runs. A Node is created with its conditions (upstream's
initialNode), so no status patch follows its creation, nor its pods' image
pulls (no image list, as kwok's Nodes). Real API server, real client.
"""

from __future__ import annotations

import asyncio
import urllib.request

from k8py.client.config import ClientConfig
from k8py.client.resources import LEASES, NODES, PODS
from k8py.client.rest import RestClient
from k8py.kubelet.config import KubeletConfig
from k8py.kubelet.simulated_nodes import SimulatedNodes
from tests.support.prometheus_text import samples
from tests.support.servers import ServerThread, sqlite_storage


def _requests(url: str, verb: str, resource: str, subresource: str | None = "") -> float:
    """``apiserver_request_total`` of one verb on one resource and subresource (None: any)."""
    text = urllib.request.urlopen(f"{url}/metrics", timeout=30).read().decode()
    match = {"verb": verb, "resource": resource} if subresource is None else \
        {"verb": verb, "resource": resource, "subresource": subresource}
    return sum(value for _, value in samples(text, "apiserver_request_total", **match))


async def _until(check, timeout: float = 60.0):  # type: ignore[no-untyped-def]
    deadline = asyncio.get_running_loop().time() + timeout
    while not (value := await check()):
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)
    return value


def _pod(name: str) -> dict:  # type: ignore[type-arg]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}


async def test_unbound_pods_stay_out_of_the_cache_and_run_once_bound(tmp_path) -> None:
    server = ServerThread(sqlite_storage(str(tmp_path / "api"))).start()
    try:
        async with RestClient(ClientConfig(server=server.url)) as client:
            config = KubeletConfig(node_name="sim", root_dir=str(tmp_path / "kubelet"), port=0, address="127.0.0.1")
            nodes = SimulatedNodes(client, config, count=2)
            runner = asyncio.create_task(nodes.run(), name="simulated-nodes")
            try:
                await asyncio.wait_for(nodes.ready.wait(), 120)
                # registered Ready in one write each: no status patch after the create
                assert _requests(server.url, "POST", "nodes") == 2
                assert _requests(server.url, "PATCH", "nodes", subresource=None) == 0  # neither the Node nor its status

                # the Leases of Nodes just created are created without being looked for first
                async def leases() -> bool:
                    return len((await client.list(LEASES, "kube-node-lease"))["items"]) == 2

                await _until(leases, timeout=90)
                assert _requests(server.url, "POST", "leases") == 2 and _requests(server.url, "GET", "leases") == 0

                await client.create(PODS, _pod("waiting"))
                await client.create(PODS, {**_pod("bound"), "spec": {**_pod("bound")["spec"], "nodeName": "sim-1"}})

                async def running() -> bool:
                    pod = await client.get(PODS, "default", "bound")
                    return (pod.get("status") or {}).get("phase") == "Running"

                await _until(running)
                assert nodes.pod_informer.lister.try_get("default", "waiting") is None
                assert nodes.pod_informer.lister.try_get("default", "bound") is not None

                # bound later (as the scheduler does): it enters the cache and runs
                await client.create(PODS, {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "waiting", "namespace": "default"},
                                           "target": {"apiVersion": "v1", "kind": "Node", "name": "sim-0"}}, subresource="binding", name="waiting")

                async def bound_running() -> bool:
                    pod = await client.get(PODS, "default", "waiting")
                    return (pod.get("status") or {}).get("phase") == "Running"

                await _until(bound_running)

                # no image list reported (kwok's Node status has none): the pulls made no Node write,
                # also once each node's status check has looked again after them
                beats = [b for b in nodes.schedule.beats if b.name.startswith("node-status-")]
                after = [b.runs for b in beats]

                async def checked_again() -> bool:
                    return all(b.runs > n for b, n in zip(beats, after))

                await _until(checked_again, timeout=120)  # a check every 30 s, at each node's own phase
                assert _requests(server.url, "PATCH", "nodes", subresource=None) == 0
                assert all(not (n.get("status") or {}).get("images") for n in (await client.list(NODES))["items"])
            finally:
                runner.cancel()
                await asyncio.gather(runner, return_exceptions=True)
    finally:
        server.stop()
