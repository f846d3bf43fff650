"""Simulated nodes read their Nodes from one shared informer, not a GET each.

At kwok's 5,000 nodes a GET per node per status update is 170 requests a
second for nothing; the informer keeps only what the status reporter
compares, and a drift (the node lifecycle controller marking a node
Unknown) is still seen and corrected. Real API server, real client.
"""

from __future__ import annotations

import asyncio
import re
import urllib.request

from k8py.client.config import ClientConfig
from k8py.client.resources import NODES
from k8py.client.rest import PatchType, RestClient
from k8py.kubelet.config import KubeletConfig
from k8py.kubelet.simulated_nodes import SimulatedNodes, node_summary
from tests.support.servers import ServerThread, sqlite_storage


def _node_gets(url: str) -> float:
    text = urllib.request.urlopen(f"{url}/metrics", timeout=30).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("apiserver_request_total{") and 'verb="GET"' in line and 'resource="nodes"' in line)


async def _until(check, timeout: float = 60.0):  # type: ignore[no-untyped-def]
    deadline = asyncio.get_running_loop().time() + timeout
    while not (value := check()):
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)
    return value


def _ready(node: dict) -> str:  # type: ignore[type-arg]
    return next((c["status"] for c in node["status"].get("conditions", []) if c["type"] == "Ready"), "")


def test_the_summary_keeps_what_the_reporter_compares_and_nothing_else() -> None:
    node = {"metadata": {"name": "n", "uid": "u", "resourceVersion": "7", "labels": {"a": "b"}, "managedFields": [{}]},
            "spec": {"podCIDR": "10.0.0.0/24", "taints": []},
            "status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "t", "message": "m"}],
                       "images": [{"names": ["x"]}], "capacity": {"cpu": "32"}}}
    assert node_summary(node) == {"metadata": {"name": "n", "uid": "u", "resourceVersion": "7"}, "spec": {"podCIDR": "10.0.0.0/24"},
                                  "status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "t"}]}}


async def test_status_updates_read_the_informer_and_still_correct_a_drift(tmp_path) -> None:
    server = ServerThread(sqlite_storage(str(tmp_path / "api"))).start()
    try:
        async with RestClient(ClientConfig(server=server.url)) as client:
            config = KubeletConfig(node_name="sim", root_dir=str(tmp_path / "kubelet"), port=0, address="127.0.0.1")
            nodes = SimulatedNodes(client, config, count=3)
            runner = asyncio.create_task(nodes.run(), name="simulated-nodes")
            try:
                await asyncio.wait_for(nodes.ready.wait(), 120)
                target = nodes.nodes[1]
                await _until(lambda: nodes.node_informer.lister.try_get(None, "sim-1"))

                gets = _node_gets(server.url)
                for _ in range(3):
                    await target.status.update()  # nothing changed: no request at all
                assert _node_gets(server.url) == gets

                # the node lifecycle controller marks the node Unknown; the reporter sees it in the informer.
                # Its own periodic update may see it first and correct it (then the informer shows Unknown
                # only for a moment): so wait for the informer to have caught up with the patch, not for
                # the transient Unknown, and let the test's update correct it if the loop has not
                node = await client.get(NODES, None, "sim-1")
                conditions = [dict(c, status="Unknown") if c["type"] == "Ready" else c for c in node["status"]["conditions"]]
                patched = await client.patch(NODES, None, "sim-1", {"status": {"conditions": conditions}},
                                             patch_type=PatchType.STRATEGIC, subresource="status")
                assert _ready(patched) == "Unknown"
                rv = int(patched["metadata"]["resourceVersion"])
                await _until(lambda: int(nodes.node_informer.lister.try_get(None, "sim-1")["metadata"]["resourceVersion"]) >= rv)
                await target.status.update()
                assert _ready(await client.get(NODES, None, "sim-1")) == "True"
                assert _node_gets(server.url) == gets + 2  # the test's own two GETs, none by the reporter
                assert re.fullmatch(r"\d+", nodes.node_informer.lister.try_get(None, "sim-1")["metadata"]["resourceVersion"])
            finally:
                runner.cancel()
                await asyncio.gather(runner, return_exceptions=True)
    finally:
        server.stop()
