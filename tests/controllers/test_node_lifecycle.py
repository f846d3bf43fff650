"""Node lifecycle and taint eviction against a real API server: a node whose
heartbeat stops goes Unknown and is tainted, its pods go unready and are
evicted after their tolerationSeconds and replaced, the node back is untainted;
DefaultTolerationSeconds admission; kubectl cordon/uncordon/taint."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from typing import Any

from k8py.client.resources import LEASES, NODES, PODS, REPLICASETS
from k8py.client.rest import PatchType
from k8py.controllers.context import ControllerOptions
from tests.controllers.conftest import eventually, running
from tests.support.kube import Kubectl
from tests.support.pod_driver import PodDriver

# grace well above the 0.3 s heartbeats, so a loaded machine does not lose a live node
FAST = ControllerOptions(node_monitor_period=0.2, node_monitor_grace_period=5.0, node_startup_grace_period=5.0)


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def _node(client: Any, name: str) -> Any:
    node = await client.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    await _heartbeat(client, name)
    return node


async def _heartbeat(client: Any, name: str) -> None:
    now = _now()
    await client.patch(NODES, None, name, {"status": {"conditions": [
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
         "lastHeartbeatTime": now, "lastTransitionTime": now}]}}, patch_type=PatchType.STRATEGIC, subresource="status")


def _cond(node: Any, ctype: str) -> Any:
    return next((c for c in node.get("status", {}).get("conditions") or () if c["type"] == ctype), None)


def _taints(node: Any) -> set[tuple[str, str]]:
    return {(t["key"], t["effect"]) for t in node.get("spec", {}).get("taints") or ()}


async def test_new_pods_get_default_not_ready_and_unreachable_tolerations(client):
    pod = await client.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                                                "spec": {"containers": [{"name": "c", "image": "i"}],
                                                         "tolerations": [{"key": "node.kubernetes.io/unreachable",
                                                                          "operator": "Exists", "effect": "NoExecute",
                                                                          "tolerationSeconds": 7}]}})
    tolerations = pod["spec"]["tolerations"]
    assert {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300} in tolerations
    assert [t["tolerationSeconds"] for t in tolerations if t["key"] == "node.kubernetes.io/unreachable"] == [7]


async def test_lost_node_is_unknown_tainted_its_pods_evicted_and_replaced_then_recovers(client, start_manager):
    await _node(client, "n1")
    await _node(client, "n2")
    await start_manager("nodelifecycle", "taint-eviction-controller", "replicaset", options=FAST)
    beating = {"n1", "n2"}

    async def beat() -> None:
        while True:
            for name in list(beating):
                await _heartbeat(client, name)
            await asyncio.sleep(0.3)

    d1 = PodDriver(client, node_name="n1")
    async with running(beat(), "heartbeats"), running(d1.run(), "driver-n1"):
        template = {"metadata": {"labels": {"app": "w"}}, "spec": {
            "containers": [{"name": "c", "image": "i"}],
            "tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2}]}}
        await client.create(REPLICASETS, {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "w", "namespace": "default"},
                                                     "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "w"}}, "template": template}})

        async def ready_on(node: str) -> list[Any]:
            pods = (await client.list(PODS, "default"))["items"]
            return [p for p in pods if p["spec"].get("nodeName") == node and (_cond(p, "Ready") or {}).get("status") == "True"]
        first = await eventually(lambda: _two(ready_on("n1")))
        first_uids = {p["metadata"]["uid"] for p in first}
        node = await client.get(NODES, None, "n1")
        assert _cond(node, "Ready")["status"] == "True" and not _taints(node)

        beating.discard("n1")  # the kubelet on n1 is gone
        d1.hold()  # ... and so nothing finishes the graceful deletions there

        async def unknown() -> Any:
            n = await client.get(NODES, None, "n1")
            return n if _cond(n, "Ready")["status"] == "Unknown" and len(_taints(n)) == 2 else None
        node = await eventually(unknown, timeout=60)
        ready = _cond(node, "Ready")
        assert (ready["reason"], ready["message"]) == ("NodeStatusUnknown", "Kubelet stopped posting node status.")
        assert _cond(node, "MemoryPressure")["reason"] == "NodeStatusNeverUpdated"
        assert _taints(node) == {("node.kubernetes.io/unreachable", "NoSchedule"), ("node.kubernetes.io/unreachable", "NoExecute")}
        assert [t for t in node["spec"]["taints"] if t["effect"] == "NoExecute"][0]["timeAdded"]

        async def pods_on_n1() -> list[Any]:
            return [p for p in (await client.list(PODS, "default"))["items"] if p["metadata"]["uid"] in first_uids]

        async def evicted() -> bool:
            pods = await pods_on_n1()
            return bool(pods) and all(p["metadata"].get("deletionTimestamp") for p in pods)
        await eventually(evicted, timeout=60)
        for pod in await pods_on_n1():
            assert _cond(pod, "Ready")["status"] == "False"
            target = _cond(pod, "DisruptionTarget")
            assert (target["reason"], target["message"]) == ("DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint")

        async def replaced() -> bool:
            pods = (await client.list(PODS, "default"))["items"]
            return len([p for p in pods if p["metadata"]["uid"] not in first_uids and not p["metadata"].get("deletionTimestamp")]) == 2
        await eventually(replaced, timeout=60)

        beating.add("n1")  # the kubelet is back

        async def recovered() -> bool:
            n = await client.get(NODES, None, "n1")
            return _cond(n, "Ready")["status"] == "True" and not _taints(n)
        await eventually(recovered, timeout=60)


async def _two(coro: Any) -> Any:
    pods = await coro
    return pods if len(pods) == 2 else None


async def test_kubectl_cordon_taint_and_uncordon(client, server, start_manager, tmp_path):
    await _node(client, "n1")
    await start_manager("nodelifecycle", options=ControllerOptions(node_monitor_period=0.2, node_monitor_grace_period=600))
    kubectl = Kubectl(server.url, str(tmp_path / "home"))

    def run(*args: str) -> str:
        return kubectl.run(*args).stdout

    out = await asyncio.to_thread(run, "cordon", "n1")
    assert "node/n1 cordoned" in out

    async def tainted(want: set[tuple[str, str]]) -> bool:
        return _taints(await client.get(NODES, None, "n1")) == want
    await eventually(lambda: tainted({("node.kubernetes.io/unschedulable", "NoSchedule")}))
    assert "SchedulingDisabled" in await asyncio.to_thread(run, "get", "node", "n1")

    out = await asyncio.to_thread(run, "taint", "nodes", "n1", "dedicated=gpu:NoSchedule")
    assert "node/n1 tainted" in out
    await eventually(lambda: tainted({("node.kubernetes.io/unschedulable", "NoSchedule"), ("dedicated", "NoSchedule")}))

    out = await asyncio.to_thread(run, "uncordon", "n1")
    assert "node/n1 uncordoned" in out
    await eventually(lambda: tainted({("dedicated", "NoSchedule")}))
    node = await client.get(NODES, None, "n1")
    assert node["spec"]["taints"] == [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]

    out = await asyncio.to_thread(run, "taint", "nodes", "n1", "dedicated:NoSchedule-")
    assert "node/n1 untainted" in out
    await eventually(lambda: tainted(set()))


async def test_new_nodes_lose_their_not_ready_taint_several_at_a_time(client, start_manager, proxy):
    # Nodes registered Ready carry the not-ready taint admission puts on every new Node; behind a slow
    # server the controller takes it off several nodes at once, not one request latency after another
    # (5,000 simulated nodes waited over a minute for theirs, and no pod could be placed on them meanwhile).
    names = [f"tainted-{i}" for i in range(24)]
    for name in names:
        await client.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                                    "spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]}})
        await _heartbeat(client, name)
    proxy.write_delay = 0.5
    # a grace far above the test's length: no heartbeats follow, and the nodes must not go Unknown meanwhile
    patient = ControllerOptions(node_monitor_period=0.2, node_monitor_grace_period=600.0, node_startup_grace_period=600.0)
    await start_manager("nodelifecycle", options=patient, via=proxy.url)

    async def untainted() -> bool:
        nodes = [await client.get(NODES, None, n) for n in names]
        return all(not _taints(n) for n in nodes)

    await eventually(untainted, timeout=60)
    assert proxy.max_writes_in_flight >= 8


async def test_a_deleted_node_is_forgotten_and_a_new_one_of_its_name_starts_afresh(client, start_manager):
    await _node(client, "gone")
    manager = await start_manager("nodelifecycle", options=FAST)
    controller = manager.controllers["nodelifecycle"]

    async def tracked() -> bool:
        return "gone" in controller._health

    await eventually(tracked)
    await client.delete(NODES, None, "gone")

    async def forgotten() -> bool:
        return "gone" not in controller._health

    await eventually(forgotten)
    await _node(client, "gone")  # the same name again: looked at as a new node
    await eventually(tracked)
