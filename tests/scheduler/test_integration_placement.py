"""Placement rules end to end: a real API server, Node objects, the scheduler in-process."""

from __future__ import annotations

import asyncio
from collections import Counter

from k8py.client.resources import NODES, PODS
from k8py.scheduler.profile import SchedulerConfig
from tests.scheduler.conftest import create_nodes, eventually, node, node_of, pod, running_scheduler, wait_bound

ZONE = "topology.kubernetes.io/zone"


async def _condition(client, name):
    got = await client.get(PODS, "default", name)
    for c in (got.get("status") or {}).get("conditions") or ():
        if c["type"] == "PodScheduled" and c["status"] == "False":
            return c
    return None


async def test_node_selector_and_required_affinity_pick_matching_nodes(client):
    await create_nodes(client, node("a", labels={"disk": "ssd"}), node("b", labels={"disk": "hdd", "gpu": "yes"}), node("c"))
    async with running_scheduler(client):
        await client.create(PODS, pod("by-selector", nodeSelector={"disk": "ssd"}))
        affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]}}}
        await client.create(PODS, pod("by-affinity", affinity=affinity))
        by_name = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["c"]}]}]}}}
        await client.create(PODS, pod("by-field", affinity=by_name))
        assert await wait_bound(client, "by-selector") == "a"
        assert await wait_bound(client, "by-affinity") == "b"
        assert await wait_bound(client, "by-field") == "c"
        await client.create(PODS, pod("nowhere", nodeSelector={"disk": "nvme"}))
        cond = await eventually(lambda: _condition(client, "nowhere"))
        assert cond["message"].startswith("0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.")


async def test_taints_repel_pods_without_tolerations(client):
    gpu = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    await create_nodes(client, node("gpu-1", taints=gpu), node("gpu-2", taints=gpu), node("plain", cpu="1"))
    async with running_scheduler(client):
        await client.create(PODS, pod("tolerant", cpu="2", tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]))
        assert (await wait_bound(client, "tolerant")).startswith("gpu-")
        await client.create(PODS, pod("intolerant", cpu="2"))
        cond = await eventually(lambda: _condition(client, "intolerant"))
        assert cond["message"] == (
            "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {dedicated: gpu}. "
            "preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, "
            "2 Preemption is not helpful for scheduling.")


async def test_required_anti_affinity_spreads_replicas_one_per_node(client):
    await create_nodes(client, *(node(f"n{i}") for i in range(3)))
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    async with running_scheduler(client):
        for i in range(3):
            await client.create(PODS, pod(f"web-{i}", labels={"app": "web"}, affinity=anti))
        placed = [await wait_bound(client, f"web-{i}") for i in range(3)]
        assert sorted(placed) == ["n0", "n1", "n2"]
        await client.create(PODS, pod("web-3", labels={"app": "web"}, affinity=anti))
        cond = await eventually(lambda: _condition(client, "web-3"))
        assert "3 node(s) didn't match pod anti-affinity rules" in cond["message"]


async def test_required_pod_affinity_follows_the_first_pod(client):
    await create_nodes(client, node("z1-a", labels={ZONE: "z1"}), node("z2-a", labels={ZONE: "z2"}), node("z2-b", labels={ZONE: "z2"}))
    async with running_scheduler(client):
        await client.create(PODS, pod("db", labels={"app": "db"}, nodeSelector={"kubernetes.io/hostname": "z2-b"}))
        assert await wait_bound(client, "db") == "z2-b"
        affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": ZONE}]}}
        for i in range(4):
            await client.create(PODS, pod(f"cache-{i}", labels={"app": "cache"}, affinity=affinity))
        for i in range(4):
            assert await wait_bound(client, f"cache-{i}") in ("z2-a", "z2-b")


async def test_topology_spread_keeps_zones_within_max_skew(client):
    nodes = [node(f"{z}-{i}", labels={ZONE: z}) for z in ("z1", "z2", "z3") for i in range(2)]
    await create_nodes(client, *nodes)
    spread = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "spread"}}}]
    async with running_scheduler(client):
        for i in range(9):
            await client.create(PODS, pod(f"s-{i}", labels={"app": "spread"}, topologySpreadConstraints=spread))
            await wait_bound(client, f"s-{i}")  # one at a time: every placement sees the previous ones
        zones = Counter()
        for i in range(9):
            zones[(await node_of(client, f"s-{i}")).split("-")[0]] += 1
        assert zones == {"z1": 3, "z2": 3, "z3": 3}


async def test_unschedulable_pod_is_moved_by_a_node_add_event(client):
    await create_nodes(client, node("tiny", cpu="500m"))
    config = SchedulerConfig(pod_initial_backoff=0.2, pod_max_backoff=0.5)
    async with running_scheduler(client, config) as scheduler:
        await client.create(PODS, pod("waiting", cpu="2"))
        await eventually(lambda: scheduler.queue.where("default/waiting") == "unschedulable", message="pod never parked")
        assert scheduler.queue.flush_unschedulable_leftover() == 0  # not yet 5 minutes
        await client.create(NODES, node("roomy", cpu="4"))
        assert await wait_bound(client, "waiting") == "roomy"
        assert scheduler.queue.max_in_unschedulable == 300.0  # the 5-minute flush did not move it


async def test_a_node_that_cannot_help_does_not_move_the_pod(client):
    await create_nodes(client, node("tiny", cpu="500m"))
    async with running_scheduler(client) as scheduler:
        await client.create(PODS, pod("big", cpu="2"))
        await eventually(lambda: scheduler.queue.where("default/big") == "unschedulable")
        await client.create(NODES, node("also-tiny", cpu="1"))  # the NodeResourcesFit hint says: no
        await eventually(lambda: scheduler.cache.node("also-tiny") is not None)
        assert scheduler.queue.where("default/big") == "unschedulable"


async def test_gated_pod_waits_until_its_gates_are_removed(client):
    await create_nodes(client, node("n1"))
    async with running_scheduler(client) as scheduler:
        created = await client.create(PODS, pod("gated", schedulingGates=[{"name": "example.com/wait"}]))
        await eventually(lambda: scheduler.queue.where("default/gated") == "gated")
        assert await node_of(client, "gated") == ""
        created["spec"]["schedulingGates"] = []
        await client.update(PODS, created)
        assert await wait_bound(client, "gated") == "n1"


async def test_pods_for_another_scheduler_are_left_alone(client):
    await create_nodes(client, node("n1"))
    async with running_scheduler(client):
        await client.create(PODS, pod("theirs", schedulerName="other-scheduler"))
        await client.create(PODS, pod("ours"))
        await wait_bound(client, "ours")
        await asyncio.sleep(0.3)  # give a wrong scheduler time to act; the assertion is that it did not
        assert await node_of(client, "theirs") == ""


async def test_anti_affinity_namespace_selector_reads_namespace_labels(client):
    from k8py.client.resources import NAMESPACES
    await client.create(NAMESPACES, {"metadata": {"name": "team-a", "labels": {"team": "a"}}})
    await create_nodes(client, node("n1"), node("n2"))
    async with running_scheduler(client):
        await client.create(PODS, pod("web", namespace="team-a", labels={"app": "web"}, nodeSelector={"kubernetes.io/hostname": "n1"}))
        assert await wait_bound(client, "web", "team-a") == "n1"
        anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "web"}}, "namespaceSelector": {"matchLabels": {"team": "a"}},
             "topologyKey": "kubernetes.io/hostname"}]}}
        for i in range(3):
            await client.create(PODS, pod(f"avoid-{i}", affinity=anti))
            assert await wait_bound(client, f"avoid-{i}") == "n2"
