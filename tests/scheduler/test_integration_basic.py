"""The scheduler against a real API server with Node objects only (no kubelet)."""

from __future__ import annotations

from k8py.client.resources import NODES, PODS
from tests.scheduler.conftest import create_nodes, eventually, node, node_of, pod, running_scheduler, wait_bound


async def test_a_pending_pod_is_bound_to_a_node(client):
    await create_nodes(client, node("n1"))
    stored = await client.get(NODES, None, "n1")
    assert stored["status"]["allocatable"]["cpu"] == "4"  # nodes keep status on create
    async with running_scheduler(client):
        await client.create(PODS, pod("p1", cpu="100m"))
        assert await wait_bound(client, "p1") == "n1"
        got = await client.get(PODS, "default", "p1")
        cond = [c for c in got["status"]["conditions"] if c["type"] == "PodScheduled"]
        assert cond and cond[0]["status"] == "True"


async def test_resource_fit_places_each_pod_where_it_fits(client):
    await create_nodes(client, node("small", cpu="1", memory="1Gi"), node("big", cpu="8", memory="16Gi"))
    async with running_scheduler(client):
        await client.create(PODS, pod("large", cpu="4", memory="4Gi"))
        assert await wait_bound(client, "large") == "big"
        await client.create(PODS, pod("huge", cpu="5"))  # 4 of big's 8 cpus are taken, small has 1
        sched_status = await eventually(lambda: _pod_scheduled_condition(client, "huge"), message="no PodScheduled=False")
        assert sched_status["status"] == "False"
        assert sched_status["reason"] == "Unschedulable"
        assert sched_status["message"] == ("0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are "
                                           "available: 2 No preemption victims found for incoming pod.")
        assert await node_of(client, "huge") == ""


async def _pod_scheduled_condition(client, name):
    got = await client.get(PODS, "default", name)
    for c in (got.get("status") or {}).get("conditions") or ():
        if c["type"] == "PodScheduled" and c["status"] == "False":
            return c
    return None
