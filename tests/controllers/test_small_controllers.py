"""ServiceAccount, PodGC and Node IPAM against a real API server."""

from __future__ import annotations

import pytest

from k8py.api.errors import NotFound
from k8py.client.resources import NAMESPACES, NODES, PODS, SERVICE_ACCOUNTS
from k8py.client.rest import PatchType
from k8py.controllers.context import ControllerOptions
from k8py.controllers.node_ipam import CIDRSet
from tests.controllers.conftest import eventually


async def has(client, resource, namespace, name) -> bool:
    try:
        await client.get(resource, namespace, name)
        return True
    except NotFound:
        return False


# -- serviceaccount ---------------------------------------------------------------------------


async def test_every_namespace_gets_a_default_service_account_recreated_if_deleted(client, start_manager):
    await start_manager("serviceaccount")
    await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    await eventually(lambda: has(client, SERVICE_ACCOUNTS, "team", "default"))
    assert await has(client, SERVICE_ACCOUNTS, "default", "default")
    first = await client.get(SERVICE_ACCOUNTS, "team", "default")
    await client.delete(SERVICE_ACCOUNTS, "team", "default")

    async def recreated():
        try:
            sa = await client.get(SERVICE_ACCOUNTS, "team", "default")
        except NotFound:
            return False
        return sa["metadata"]["uid"] != first["metadata"]["uid"]

    await eventually(recreated)


# -- podgc ---------------------------------------------------------------------------------------


def pod(name: str, node: str | None = None) -> dict:
    spec: dict = {"containers": [{"name": "c", "image": "i"}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


async def finish(client, name: str, phase: str) -> None:
    await client.patch(PODS, "default", name, {"status": {"phase": phase}}, patch_type=PatchType.MERGE, subresource="status")


async def test_pod_gc_keeps_the_newest_terminated_pods_up_to_the_threshold(client, start_manager):
    # created in name order: oldest first by creationTimestamp, ties (same second) by name
    for i in range(5):
        await client.create(PODS, pod(f"done-{i}"))
        await finish(client, f"done-{i}", "Succeeded" if i % 2 else "Failed")
    await client.create(PODS, pod("running"))
    await start_manager("podgc", options=ControllerOptions(terminated_pod_gc_threshold=2, pod_gc_period=0.1))

    async def collected():
        names = sorted(p["metadata"]["name"] for p in (await client.list(PODS, "default"))["items"])
        return names == ["done-3", "done-4", "running"]

    await eventually(collected)


@pytest.mark.parametrize("node_exists", [False, True])
async def test_pod_gc_force_deletes_pods_of_a_missing_node_after_the_quarantine(client, start_manager, node_exists):
    if node_exists:
        await client.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    await client.create(PODS, pod("orphan", node="n1"))
    manager = await start_manager("podgc", options=ControllerOptions(pod_gc_period=0.1, pod_gc_quarantine=0.5))
    gc = manager.controllers["podgc"]
    if node_exists:
        await eventually(lambda: gc.pods.has_synced())
        for _ in range(10):  # several passes of the collector, well past the quarantine
            passes = len(gc.deleted)
            await gc.gc()
        assert passes == 0 and await has(client, PODS, "default", "orphan")
        return
    await eventually(lambda: "default/orphan" in gc.deleted)
    assert not await has(client, PODS, "default", "orphan")


async def test_pod_gc_force_deletes_unscheduled_terminating_pods(client, start_manager):
    body = pod("stuck")
    body["metadata"]["finalizers"] = ["example.com/x"]
    await client.create(PODS, body)
    await client.delete(PODS, "default", "stuck")
    manager = await start_manager("podgc", options=ControllerOptions(pod_gc_period=0.1))
    gc = manager.controllers["podgc"]
    await eventually(lambda: "default/stuck" in gc.deleted)


# -- nodeipam ------------------------------------------------------------------------------------


def test_the_range_allocator_hands_out_each_subnet_once():
    cidrs = CIDRSet("127.64.0.0/22", 24)
    assert cidrs.occupy("127.64.1.0/24")
    assert [cidrs.allocate() for _ in range(4)] == ["127.64.0.0/24", "127.64.2.0/24", "127.64.3.0/24", None]
    cidrs.release("127.64.2.0/24")
    assert cidrs.allocate() == "127.64.2.0/24"
    assert not cidrs.occupy("10.0.0.0/24")
    with pytest.raises(ValueError, match="node-cidr-mask-size"):
        CIDRSet("127.64.0.0/10", 8)


async def test_nodes_get_distinct_pod_cidrs_from_the_cluster_cidr(client, start_manager):
    await client.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "pre"},
                                "spec": {"podCIDR": "127.64.0.0/24", "podCIDRs": ["127.64.0.0/24"]}})
    await start_manager("nodeipam")
    for name in ("a", "b", "c"):
        await client.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})

    async def allocated():
        nodes = (await client.list(NODES))["items"]
        cidrs = [(n.get("spec") or {}).get("podCIDR") for n in nodes]
        return cidrs if all(cidrs) and len(nodes) == 4 else None

    cidrs = await eventually(allocated)
    assert len(set(cidrs)) == 4
    assert all(c.startswith("127.") and c.endswith("/24") and c != "127.0.0.0/24" for c in cidrs)
    node = await client.get(NODES, None, "b")
    assert node["spec"]["podCIDRs"] == [node["spec"]["podCIDR"]]
