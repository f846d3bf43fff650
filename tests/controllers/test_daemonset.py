"""The DaemonSet controller against a real API server: nodes, taints, rolling
updates (asserted event by event from a watch) and kubectl rollout."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from k8py.client.resources import CORE_EVENTS, DAEMONSETS, NODES, PODS
from k8py.controllers.revision_control import CONTROLLER_REVISIONS
from tests.controllers.conftest import eventually
from tests.support.kube import Kubectl


def _node(name: str, taints: list | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {"taints": taints or []}}


def _ds(image: str = "agent:1", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
            "spec": {"selector": {"matchLabels": {"app": "agent"}},
                     "template": {"metadata": {"labels": {"app": "agent"}},
                                  "spec": {"containers": [{"name": "agent", "image": image}]}}, **spec}}


def _image_patch(image: str) -> dict[str, Any]:
    return {"spec": {"template": {"spec": {"containers": [{"name": "agent", "image": image}]}}}}


async def _live_pods(client) -> list[dict[str, Any]]:
    return [p for p in (await client.list(PODS, "default"))["items"] if not p["metadata"].get("deletionTimestamp")]


def _pinned(pod: dict[str, Any]) -> str:
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    return terms[0]["matchFields"][0]["values"][0]


async def _status(client) -> dict[str, Any]:
    return (await client.get(DAEMONSETS, "default", "agent")).get("status") or {}


async def test_one_pod_per_untainted_node_and_none_on_the_tainted_one(client, start_manager, driver) -> None:
    for name in ("n1", "n2"):
        await client.create(NODES, _node(name))
    await client.create(NODES, _node("n3", [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]))
    await start_manager("daemonset")
    await client.create(DAEMONSETS, _ds(), namespace="default")

    async def settled():
        s = await _status(client)
        return s if s.get("desiredNumberScheduled") == 2 and s.get("numberReady") == 2 else None

    status = await eventually(settled)
    assert status["currentNumberScheduled"] == 2 and status["numberMisscheduled"] == 0
    assert status["numberAvailable"] == 2 and status["updatedNumberScheduled"] == 2
    pods = await _live_pods(client)
    assert sorted(_pinned(p) for p in pods) == ["n1", "n2"]
    for pod in pods:
        keys = {(t.get("key"), t.get("effect")) for t in pod["spec"]["tolerations"]}
        assert ("node.kubernetes.io/unschedulable", "NoSchedule") in keys
        assert ("node.kubernetes.io/not-ready", "NoExecute") in keys
        assert pod["metadata"]["labels"]["controller-revision-hash"]
        assert "nodeName" not in pod["spec"]  # the scheduler binds it

    # the taint is lifted: the third node gets its pod
    await client.patch(NODES, None, "n3", {"spec": {"taints": None}})
    await eventually(lambda: _has_count(client, 3))
    # a NoExecute taint evicts the daemon pod from that node
    await client.patch(NODES, None, "n3", {"spec": {"taints": [{"key": "dedicated", "effect": "NoExecute"}]}})
    await eventually(lambda: _has_count(client, 2))
    assert sorted(_pinned(p) for p in await _live_pods(client)) == ["n1", "n2"]


async def _has_count(client, n: int) -> bool:
    return len(await _live_pods(client)) == n


async def test_rolling_update_keeps_at_most_max_unavailable_nodes_without_an_available_pod(client, start_manager, driver) -> None:
    nodes = [f"n{i}" for i in range(4)]
    for name in nodes:
        await client.create(NODES, _node(name))
    await start_manager("daemonset")
    await client.create(DAEMONSETS, _ds(updateStrategy={"type": "RollingUpdate",
                                                         "rollingUpdate": {"maxUnavailable": 1}}), namespace="default")
    await eventually(lambda: _ready_on(client, 4, "agent:1"))

    pods = await client.list(PODS, "default")
    state: dict[str, dict[str, Any]] = {p["metadata"]["name"]: p for p in pods["items"]}
    worst: list[int] = []

    async def watch() -> None:
        async for event in client.watch(PODS, "default", resource_version=pods["metadata"]["resourceVersion"]):
            if event.type == "BOOKMARK":
                continue
            obj = event.object
            if event.type == "DELETED":
                state.pop(obj["metadata"]["name"], None)
            else:
                state[obj["metadata"]["name"]] = obj
            available_nodes = {_pinned(p) for p in state.values() if not p["metadata"].get("deletionTimestamp")
                               and any(c["type"] == "Ready" and c["status"] == "True"
                                       for c in (p.get("status") or {}).get("conditions") or ())}
            worst.append(len(nodes) - len(available_nodes))

    watcher = asyncio.create_task(watch(), name="ds-watch")
    try:
        await client.patch(DAEMONSETS, "default", "agent", _image_patch("agent:2"))
        await eventually(lambda: _ready_on(client, 4, "agent:2"))
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    assert worst and max(worst) <= 1, worst
    status = await eventually(lambda: _status_where(client, updatedNumberScheduled=4, numberAvailable=4))
    assert "numberUnavailable" not in status and status["numberReady"] == 4
    revisions = (await client.list(CONTROLLER_REVISIONS, "default"))["items"]
    assert sorted(r["revision"] for r in revisions) == [1, 2]


async def test_max_surge_starts_the_new_pod_before_the_old_one_goes(client, start_manager, driver) -> None:
    await client.create(NODES, _node("n1"))
    await start_manager("daemonset")
    await client.create(DAEMONSETS, _ds(updateStrategy={"type": "RollingUpdate", "rollingUpdate": {
        "maxUnavailable": 0, "maxSurge": 1}}), namespace="default")
    await eventually(lambda: _ready_on(client, 1, "agent:1"))
    gate = {"open": False}
    driver.outcome = lambda pod: "Ready" if gate["open"] or pod["spec"]["containers"][0]["image"] == "agent:1" else None
    await client.patch(DAEMONSETS, "default", "agent", _image_patch("agent:2"))
    # the new pod starts beside the old one, and the old one stays while the new one is not ready
    await eventually(lambda: _images(client, ["agent:1", "agent:2"]))
    await eventually(lambda: _status_where(client, observedGeneration=2, numberAvailable=1, updatedNumberScheduled=1))
    assert await _images(client, ["agent:1", "agent:2"])
    gate["open"] = True
    driver.hold()
    driver.release()
    await eventually(lambda: _ready_on(client, 1, "agent:2"))


async def test_on_delete_replaces_only_deleted_pods(client, start_manager, driver) -> None:
    await client.create(NODES, _node("n1"))
    await client.create(NODES, _node("n2"))
    await start_manager("daemonset")
    await client.create(DAEMONSETS, _ds(updateStrategy={"type": "OnDelete"}), namespace="default")
    await eventually(lambda: _ready_on(client, 2, "agent:1"))
    await client.patch(DAEMONSETS, "default", "agent", _image_patch("agent:2"))
    await eventually(lambda: _observed(client, 2))
    assert {p["spec"]["containers"][0]["image"] for p in await _live_pods(client)} == {"agent:1"}
    victim = (await _live_pods(client))[0]
    await client.delete(PODS, "default", victim["metadata"]["name"])
    await eventually(lambda: _images(client, ["agent:1", "agent:2"]))


async def _status_where(client, **want: Any) -> dict[str, Any] | None:
    status = await _status(client)
    return status if all(status.get(k) == v for k, v in want.items()) else None


async def _observed_status(client, generation: int) -> dict[str, Any] | None:
    status = await _status(client)
    return status if status.get("observedGeneration") == generation else None


async def _observed(client, generation: int) -> bool:
    return (await _status(client)).get("observedGeneration") == generation


async def _images(client, images: list[str]) -> bool:
    return sorted(p["spec"]["containers"][0]["image"] for p in await _live_pods(client)) == images


async def _ready_on(client, n: int, image: str) -> bool:
    pods = await _live_pods(client)
    return len(pods) == n and all(p["spec"]["containers"][0]["image"] == image and any(
        c["type"] == "Ready" and c["status"] == "True" for c in (p.get("status") or {}).get("conditions") or ())
        for p in pods)


@pytest.mark.kubectl
async def test_kubectl_rollout_status_history_and_undo_for_a_daemonset(client, server, start_manager, driver, tmp_path) -> None:
    await client.create(NODES, _node("n1"))
    await start_manager("daemonset")
    await client.create(DAEMONSETS, _ds(), namespace="default")
    await eventually(lambda: _ready_on(client, 1, "agent:1"))
    k = Kubectl(server.url, str(tmp_path / "home"))
    await asyncio.to_thread(k.run, "set", "image", "daemonset/agent", "agent=agent:2")
    out = await asyncio.to_thread(k.run, "rollout", "status", "daemonset/agent", "--timeout=60s")
    assert 'daemon set "agent" successfully rolled out' in out.stdout
    history = (await asyncio.to_thread(k.run, "rollout", "history", "daemonset/agent")).stdout
    assert "REVISION" in history and "1 " in history and "2 " in history
    await asyncio.to_thread(k.run, "rollout", "undo", "daemonset/agent")
    await eventually(lambda: _ready_on(client, 1, "agent:1"))
    revisions = (await client.list(CONTROLLER_REVISIONS, "default"))["items"]
    assert max(r["revision"] for r in revisions) == 3  # the undo is a new revision, no duplicate
    assert len(revisions) == 2


async def test_failed_pods_on_a_node_are_deleted_with_a_doubling_backoff(client) -> None:
    from k8py.client.clock import FakeClock
    from k8py.client.event_recorder import EventBroadcaster
    from k8py.client.informer_factory import InformerFactory
    from k8py.controllers.context import ControllerContext
    from k8py.controllers.daemonset import DaemonSetController

    clock = FakeClock()
    ctx = ControllerContext(client=client, informers=InformerFactory(client),
                            broadcaster=EventBroadcaster(client, clock=clock), clock=clock)
    controller = DaemonSetController(ctx)
    assert controller._failed_pod_backoff("default/agent", "n1") == 0  # first deletion at once
    assert controller._failed_pod_backoff("default/agent", "n1") == 1.0
    assert controller._failed_pod_backoff("default/agent", "n2") == 0  # per node
    clock.advance(1.0)
    assert controller._failed_pod_backoff("default/agent", "n1") == 0
    clock.advance(1.5)
    assert controller._failed_pod_backoff("default/agent", "n1") == 0.5  # now 2 s
    clock.advance(10_000)
    for _ in range(20):
        controller._failed_pod_backoff("default/agent", "n1")
        clock.advance(10_000)
    assert controller._failed_backoff[("default/agent", "n1")][0] == 900.0


async def test_a_failed_daemon_pod_is_replaced(client, start_manager, driver) -> None:
    await client.create(NODES, _node("n1"))
    failed_once: list[str] = []

    def outcome(pod: dict[str, Any]) -> str:
        if not failed_once or failed_once == [pod["metadata"]["name"]]:
            failed_once[:] = [pod["metadata"]["name"]]
            return "Failed"
        return "Ready"

    driver.outcome = outcome
    await start_manager("daemonset")
    await client.create(DAEMONSETS, _ds(), namespace="default")
    await eventually(lambda: _ready_on(client, 1, "agent:1"))
    assert (await _live_pods(client))[0]["metadata"]["name"] != failed_once[0]

    async def warned() -> bool:
        events = (await client.list(CORE_EVENTS, "default"))["items"]
        return any(e.get("reason") == "FailedDaemonPod" and failed_once[0] in e.get("message", "") for e in events)

    await eventually(warned)


async def test_the_real_scheduler_binds_each_daemon_pod_to_the_node_it_is_pinned_to(client, start_manager) -> None:
    from tests.scheduler.conftest import node as schedulable_node, running_scheduler

    for name in ("s1", "s2", "s3"):
        await client.create(NODES, schedulable_node(name))
    async with running_scheduler(client, events=False):
        await start_manager("daemonset")
        await client.create(DAEMONSETS, _ds(), namespace="default")

        async def bound() -> dict[str, str] | None:
            pods = await _live_pods(client)
            placed = {_pinned(p): p["spec"].get("nodeName") for p in pods}
            return placed if len(pods) == 3 and all(placed.values()) else None

        placed = await eventually(bound)
    assert placed == {"s1": "s1", "s2": "s2", "s3": "s3"}
