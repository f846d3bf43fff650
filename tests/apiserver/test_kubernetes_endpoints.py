"""The kubernetes Service's Endpoints and EndpointSlice list every API server
holding an unexpired identity Lease (the endpoint reconciler)."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone

from k8py.api.errors import NotFound
from k8py.client.config import ClientConfig
from k8py.client.resources import ENDPOINT_SLICES, ENDPOINTS, LEASES
from k8py.client.rest import RestClient
from tests.support.servers import ServerThread, sqlite_storage


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def _eventually(check, timeout: float = 20.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        result = await check()
        if result:
            return result
        assert asyncio.get_running_loop().time() < deadline, "condition not met"
        await asyncio.sleep(0.05)


async def test_every_live_api_server_is_an_endpoint_of_the_kubernetes_service(tmp_path):
    with ServerThread(sqlite_storage(str(tmp_path / "data")), endpoint_reconciler_interval=0.2) as server:
        port = int(server.url.rsplit(":", 1)[1])
        async with RestClient(ClientConfig(server=server.url)) as client:
            async def subsets():
                try:
                    ep = await client.get(ENDPOINTS, "default", "kubernetes")
                except NotFound:
                    return None
                return ep.get("subsets")

            first = await _eventually(subsets)
            assert first == [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}]
            ep = await client.get(ENDPOINTS, "default", "kubernetes")
            assert ep["metadata"]["labels"]["endpointslice.kubernetes.io/skip-mirror"] == "true"
            slc = await client.get(ENDPOINT_SLICES, "default", "kubernetes")
            assert slc["endpoints"][0]["addresses"] == ["127.0.0.1"] and slc["ports"][0]["port"] == port
            leases = (await client.list(LEASES, "kube-system", label_selector="apiserver.kubernetes.io/identity=kube-apiserver"))["items"]
            assert len(leases) == 1 and leases[0]["spec"]["leaseDurationSeconds"] == 15

            # another server on the same port joins with its own Lease, and leaves when it stops renewing
            other = {"metadata": {"name": "apiserver-other", "labels": {"apiserver.kubernetes.io/identity": "kube-apiserver"},
                                  "annotations": {"k8py.io/apiserver-address": "127.0.0.2", "k8py.io/apiserver-port": str(port)}},
                     "spec": {"holderIdentity": "other", "leaseDurationSeconds": 2, "renewTime": _now()}}
            await client.create(LEASES, other, namespace="kube-system")

            async def two():
                got = await subsets()
                return got and [a["ip"] for a in got[0]["addresses"]] == ["127.0.0.1", "127.0.0.2"]

            await _eventually(two)

            async def back_to_one():
                got = await subsets()
                return got and [a["ip"] for a in got[0]["addresses"]] == ["127.0.0.1"]

            await _eventually(back_to_one)

            async def slice_back_to_one():  # the slice is written after the Endpoints: it may lag a pass
                slc = await client.get(ENDPOINT_SLICES, "default", "kubernetes")
                return [e["addresses"] for e in slc["endpoints"]] == [["127.0.0.1"]]

            await _eventually(slice_back_to_one)
