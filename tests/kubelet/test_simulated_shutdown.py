"""Simulated nodes stop at once, even with a request in flight on their shared HTTP server.

The server serves no streams, so it lets a request in flight finish for
``SHUTDOWN_GRACE`` (a fraction of a second) instead of aiohttp's 60 s, then
cancels it. No request of the simulated server stays in flight on its own
(a simulated container has no log to follow): the one here is a log request
whose container lookup is made to wait forever — the only stand-in in the
test; the API server, client and nodes are real.
"""

from __future__ import annotations

import asyncio
import time

from k8py.client.config import ClientConfig
from k8py.client.resources import PODS
from k8py.client.rest import RestClient
from k8py.kubelet.config import KubeletConfig
from k8py.kubelet.simulated_nodes import SHUTDOWN_GRACE, SimulatedNodes
from tests.kubelet.test_simulated_bound_pods import _until
from tests.support.servers import ServerThread, sqlite_storage


async def test_simulated_nodes_stop_at_once_with_a_request_in_flight(tmp_path) -> None:
    assert SHUTDOWN_GRACE <= 1.0
    server = ServerThread(sqlite_storage(str(tmp_path / "api"))).start()
    try:
        async with RestClient(ClientConfig(server=server.url)) as client:
            config = KubeletConfig(node_name="sim", root_dir=str(tmp_path / "kubelet"), port=0, address="127.0.0.1")
            nodes = SimulatedNodes(client, config, count=1)
            runner = asyncio.create_task(nodes.run(), name="simulated-nodes")
            try:
                await asyncio.wait_for(nodes.ready.wait(), 120)
                await client.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                                           "spec": {"nodeName": "sim-0", "containers": [{"name": "c", "image": "nginx"}]}})

                async def running() -> bool:
                    return ((await client.get(PODS, "default", "p")).get("status") or {}).get("phase") == "Running"

                await _until(running)
                entered = asyncio.Event()

                async def never(namespace: str, name: str) -> list:  # type: ignore[type-arg]
                    entered.set()
                    await asyncio.Event().wait()
                    return []

                nodes.containers = never  # type: ignore[method-assign]
                reader, writer = await asyncio.open_connection("127.0.0.1", nodes.port)
                writer.write(b"GET /containerLogs/default/p/c?follow=true HTTP/1.1\r\nHost: sim\r\n\r\n")
                await writer.drain()
                await asyncio.wait_for(entered.wait(), 60)  # the request is in its handler
            finally:
                started = time.monotonic()
                runner.cancel()
                await asyncio.gather(runner, return_exceptions=True)
                stopped = time.monotonic() - started
        writer.close()
        # aiohttp's default waits 60 s for the handler, then as long again for its cancellation
        assert stopped < 30, f"the simulated nodes took {stopped:.1f} s to stop"
        assert runner.cancelled()
    finally:
        server.stop()
