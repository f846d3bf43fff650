"""The supervisor's view of Node readiness: the Table kubectl prints, not the Nodes themselves."""

from __future__ import annotations

import aiohttp

from k8py.client.config import ClientConfig
from k8py.client.resources import NODES
from k8py.client.rest import PatchType, RestClient
from k8py.cluster.readiness import ready_nodes
from tests.support.servers import ServerThread, sqlite_storage


def _node(name: str, *, unschedulable: bool = False) -> dict:  # type: ignore[type-arg]
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {"unschedulable": unschedulable}}


async def test_ready_nodes_are_the_rows_whose_status_is_ready(tmp_path) -> None:
    server = ServerThread(sqlite_storage(str(tmp_path / "api"))).start()
    try:
        async with RestClient(ClientConfig(server=server.url)) as client:
            for name, ready, cordoned in (("a", "True", False), ("b", "False", False), ("c", "True", True), ("d", "", False)):
                await client.create(NODES, _node(name, unschedulable=cordoned))
                if ready:
                    await client.patch(NODES, None, name, {"status": {"conditions": [{"type": "Ready", "status": ready}]}},
                                       patch_type=PatchType.MERGE, subresource="status")
        async with aiohttp.ClientSession() as session:
            assert await ready_nodes(session, server.url) == ["a", "c"]  # c: Ready,SchedulingDisabled
    finally:
        server.stop()


async def test_no_answer_is_none() -> None:
    async with aiohttp.ClientSession() as session:
        assert await ready_nodes(session, "http://127.0.0.1:9") is None
