"""A simulated node finishes a deletion as kwok does: the delete with grace 0 at once, no final status first.

Only a pod with finalizers gets its final status written before that delete
(it stays after it, and whoever holds the finalizer reads its phase). Real
API server, real client.
"""

from __future__ import annotations

import asyncio

from k8py.api.errors import NotFound
from k8py.client.config import ClientConfig
from k8py.client.resources import PODS
from k8py.client.rest import PatchType, RestClient
from k8py.kubelet.config import KubeletConfig
from k8py.kubelet.simulated_nodes import SimulatedNodes
from tests.kubelet.test_simulated_bound_pods import _requests, _until
from tests.support.servers import ServerThread, sqlite_storage


def _pod(name: str, **meta: object) -> dict:  # type: ignore[type-arg]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", **meta},
            "spec": {"nodeName": "sim-0", "containers": [{"name": "c", "image": "nginx"}]}}


async def test_a_deleted_pod_goes_without_a_final_status_unless_it_has_finalizers(tmp_path) -> None:
    server = ServerThread(sqlite_storage(str(tmp_path / "api"))).start()
    try:
        async with RestClient(ClientConfig(server=server.url)) as client:
            config = KubeletConfig(node_name="sim", root_dir=str(tmp_path / "kubelet"), port=0, address="127.0.0.1")
            nodes = SimulatedNodes(client, config, count=1)
            runner = asyncio.create_task(nodes.run(), name="simulated-nodes")
            try:
                await asyncio.wait_for(nodes.ready.wait(), 120)
                await client.create(PODS, _pod("plain"))
                await client.create(PODS, _pod("held", finalizers=["example.com/hold"]))

                async def running() -> bool:
                    pods = [await client.get(PODS, "default", n) for n in ("plain", "held")]
                    return all((p.get("status") or {}).get("phase") == "Running" for p in pods)

                await _until(running)
                patches = _requests(server.url, "PATCH", "pods", "status")
                deletes = _requests(server.url, "DELETE", "pods")

                await client.delete(PODS, "default", "plain")  # graceful: 30 s, which the kubelet ends at once

                async def plain_gone() -> bool:
                    try:
                        await client.get(PODS, "default", "plain")
                    except NotFound:
                        return True
                    return False

                await _until(plain_gone)
                assert _requests(server.url, "DELETE", "pods") == deletes + 2  # the test's and the kubelet's (grace 0)
                assert _requests(server.url, "PATCH", "pods", "status") == patches  # no final status written

                await client.delete(PODS, "default", "held")

                async def held_final() -> dict | None:  # type: ignore[type-arg]
                    pod = await client.get(PODS, "default", "held")
                    statuses = (pod.get("status") or {}).get("containerStatuses") or []
                    return pod if statuses and "terminated" in (statuses[0].get("state") or {}) else None

                pod = await _until(held_final)
                assert pod["metadata"]["deletionTimestamp"] and pod["metadata"]["finalizers"] == ["example.com/hold"]
                assert _requests(server.url, "PATCH", "pods", "status") == patches + 1
                await client.patch(PODS, "default", "held", {"metadata": {"finalizers": None}}, patch_type=PatchType.MERGE)

                async def held_gone() -> bool:
                    try:
                        await client.get(PODS, "default", "held")
                    except NotFound:
                        return True
                    return False

                await _until(held_gone)
            finally:
                runner.cancel()
                await asyncio.gather(runner, return_exceptions=True)
    finally:
        server.stop()
