"""Preemption and priority end to end (PriorityClass admission, victims, nominatedNodeName)."""

from __future__ import annotations

import pytest

from k8py.api.errors import Forbidden
from k8py.client.resources import PODS, PRIORITY_CLASSES
from tests.scheduler.conftest import create_nodes, eventually, node, pod, running_scheduler, wait_bound


def priority_class(name: str, value: int, **extra) -> dict:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value, **extra}


async def test_priority_class_fills_spec_priority_and_unknown_class_is_forbidden(client):
    await client.create(PRIORITY_CLASSES, priority_class("high", 1000))
    created = await client.create(PODS, pod("p", priorityClassName="high"))
    assert created["spec"]["priority"] == 1000
    assert created["spec"]["preemptionPolicy"] == "PreemptLowerPriority"
    critical = await client.create(PODS, pod("crit", priorityClassName="system-cluster-critical"))
    assert critical["spec"]["priority"] == 2_000_000_000
    with pytest.raises(Forbidden) as err:
        await client.create(PODS, pod("q", priorityClassName="nope"))
    assert str(err.value.message) == 'pods "q" is forbidden: no PriorityClass with name nope was found'


async def test_global_default_class_applies_and_only_one_may_exist(client):
    await client.create(PRIORITY_CLASSES, priority_class("default-prio", 7, globalDefault=True))
    with pytest.raises(Forbidden):
        await client.create(PRIORITY_CLASSES, priority_class("another-default", 8, globalDefault=True))
    created = await client.create(PODS, pod("p"))
    assert created["spec"]["priority"] == 7
    assert created["spec"]["priorityClassName"] == "default-prio"


async def test_higher_priority_pod_preempts_a_lower_one_and_is_nominated(client):
    await client.create(PRIORITY_CLASSES, priority_class("low", 10))
    await client.create(PRIORITY_CLASSES, priority_class("high", 1000))
    await create_nodes(client, node("n1", cpu="2"))
    async with running_scheduler(client):
        await client.create(PODS, pod("victim", cpu="1500m", priorityClassName="low"))
        assert await wait_bound(client, "victim") == "n1"
        await client.create(PODS, pod("preemptor", cpu="1500m", priorityClassName="high"))

        async def nominated():
            got = await client.get(PODS, "default", "preemptor")
            return (got.get("status") or {}).get("nominatedNodeName")
        assert await eventually(nominated, message="preemptor never nominated") == "n1"

        async def victim_terminating():
            victim = await client.get(PODS, "default", "victim")
            return victim["metadata"].get("deletionTimestamp")
        # deleted gracefully (no kubelet finishes it here); the preemption is asynchronous (the
        # victims are deleted on their own task), so the nomination may be written first
        assert await eventually(victim_terminating, message="the victim was never deleted")
        # play the kubelet: the victim's containers are gone
        await client.delete(PODS, "default", "victim", grace_period_seconds=0)
        assert await wait_bound(client, "preemptor") == "n1"


async def test_pod_with_preemption_policy_never_does_not_preempt(client):
    await client.create(PRIORITY_CLASSES, priority_class("low", 10))
    await client.create(PRIORITY_CLASSES, priority_class("polite", 1000, preemptionPolicy="Never"))
    await create_nodes(client, node("n1", cpu="1"))
    async with running_scheduler(client):
        await client.create(PODS, pod("occupant", cpu="800m", priorityClassName="low"))
        await wait_bound(client, "occupant")
        await client.create(PODS, pod("polite", cpu="800m", priorityClassName="polite"))

        async def message():
            got = await client.get(PODS, "default", "polite")
            for c in (got.get("status") or {}).get("conditions") or ():
                if c["type"] == "PodScheduled" and c["status"] == "False":
                    return c["message"]
        assert await eventually(message) == ("0/1 nodes are available: 1 Insufficient cpu. "
                                             "preemption: not eligible due to preemptionPolicy=Never.")
        occupant = await client.get(PODS, "default", "occupant")
        assert not occupant["metadata"].get("deletionTimestamp")


async def test_kubectl_get_priorityclasses_prints_upstream_columns(kubectl):
    out = kubectl.run("get", "priorityclasses").stdout.splitlines()
    assert out[0].split() == ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"]
    rows = {line.split()[0]: line.split() for line in out[1:]}
    assert rows["system-node-critical"][1:3] == ["2000001000", "false"]
    assert rows["system-cluster-critical"][-1] == "PreemptLowerPriority"
