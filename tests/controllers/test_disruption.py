"""PodDisruptionBudgets: the disruption controller's status, the pods/eviction
subresource (429 when a budget would break, unhealthyPodEvictionPolicy), and
``kubectl drain`` blocked by a budget until another replica is ready."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from k8py.api.errors import StatusError
from k8py.client.resources import NODES, POD_DISRUPTION_BUDGETS, PODS, REPLICASETS
from k8py.client.rest import PatchType
from tests.controllers.conftest import eventually, running
from tests.support.kube import Kubectl
from tests.support.pod_driver import PodDriver


def _rs(name: str, replicas: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}


def _pdb(name: str, app: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": app}}, **spec}}


def _eviction(name: str) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": "default"}}


async def _live(client: Any, app: str) -> list[Any]:
    pods = (await client.list(PODS, "default", label_selector=f"app={app}"))["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


async def _status(client: Any, name: str, **want: Any) -> Any:
    status = (await client.get(POD_DISRUPTION_BUDGETS, "default", name)).get("status") or {}
    return status if all(status.get(k) == v for k, v in want.items()) else None


async def test_budget_status_eviction_429_and_recovery(client, start_manager):
    await client.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    await start_manager("replicaset", "disruption")
    readied: set[str] = set()
    gate = asyncio.Event()

    def outcome(pod: Any) -> str:  # the first three pods get ready; replacements only once the gate opens
        name = pod["metadata"]["name"]
        if name in readied or len(readied) < 3 or gate.is_set():
            readied.add(name)
            return "Ready"
        return "Running"
    driver = PodDriver(client, node_name="n1", outcome=outcome)
    async with running(driver.run(), "driver"):
        await client.create(REPLICASETS, _rs("web", 3))
        await client.create(POD_DISRUPTION_BUDGETS, _pdb("web", "web", minAvailable=2))
        status = await eventually(lambda: _status(client, "web", currentHealthy=3, disruptionsAllowed=1))
        assert (status["expectedPods"], status["desiredHealthy"], status["observedGeneration"]) == (3, 2, 1)
        cond = status["conditions"][0]
        assert (cond["type"], cond["status"], cond["reason"]) == ("DisruptionAllowed", "True", "SufficientPods")

        pods = await _live(client, "web")
        reply = await client.create(PODS, _eviction(pods[0]["metadata"]["name"]), namespace="default",
                                    name=pods[0]["metadata"]["name"], subresource="eviction")
        assert reply["status"] == "Success"
        with pytest.raises(StatusError) as err:
            await client.create(PODS, _eviction(pods[1]["metadata"]["name"]), namespace="default",
                                name=pods[1]["metadata"]["name"], subresource="eviction")
        assert err.value.code == 429
        body = err.value.to_dict()
        assert body["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
        assert body["details"]["causes"][0]["reason"] == "DisruptionBudget"
        assert "needs 2 healthy pods" in body["details"]["causes"][0]["message"]
        # the replacement becomes ready: another disruption is allowed again
        gate.set()
        driver.release()
        await eventually(lambda: _status(client, "web", currentHealthy=3, disruptionsAllowed=1), timeout=60)
        await client.create(PODS, _eviction(pods[1]["metadata"]["name"]), namespace="default",
                            name=pods[1]["metadata"]["name"], subresource="eviction")


async def test_unhealthy_pods_follow_the_unhealthy_pod_eviction_policy(client, start_manager):
    await client.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    await start_manager("replicaset", "disruption")
    driver = PodDriver(client, node_name="n1", outcome=lambda pod: "Running")  # running, never ready
    async with running(driver.run(), "driver"):
        await client.create(REPLICASETS, _rs("sick", 2))
        await client.create(POD_DISRUPTION_BUDGETS, _pdb("sick", "sick", minAvailable=1))
        await eventually(lambda: _status(client, "sick", expectedPods=2, currentHealthy=0, disruptionsAllowed=0))
        pods = await eventually(lambda: _two_running(client, "sick"))
        name = pods[0]["metadata"]["name"]
        with pytest.raises(StatusError) as err:  # IfHealthyBudget: the budget is not met, so no
            await client.create(PODS, _eviction(name), namespace="default", name=name, subresource="eviction")
        assert err.value.code == 429
        await client.patch(POD_DISRUPTION_BUDGETS, "default", "sick", {"spec": {"unhealthyPodEvictionPolicy": "AlwaysAllow"}},
                           patch_type=PatchType.MERGE)
        await eventually(lambda: _status(client, "sick", observedGeneration=2))
        driver.hold()  # keep the evicted pod Terminating, to look at it
        await client.create(PODS, _eviction(name), namespace="default", name=name, subresource="eviction")
        pod = await client.get(PODS, "default", name)
        assert pod["metadata"].get("deletionTimestamp")
        target = [c for c in pod["status"]["conditions"] if c["type"] == "DisruptionTarget"]
        assert target and target[0]["reason"] == "EvictionByEvictionAPI"


async def _two_running(client: Any, app: str) -> list[Any] | None:
    pods = [p for p in await _live(client, app) if (p.get("status") or {}).get("phase") == "Running"]
    return pods if len(pods) == 2 else None


async def test_kubectl_drain_waits_for_the_budget_then_empties_the_node(client, server, start_manager, tmp_path):
    for name in ("n1", "n2"):
        await client.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    await start_manager("replicaset", "disruption")
    ready_on_n2 = asyncio.Event()

    def outcome(pod: Any) -> str:
        return "Ready" if pod["spec"].get("nodeName") == "n1" or ready_on_n2.is_set() else "Running"
    driver = PodDriver(client, node_name="n1", outcome=outcome)
    async with running(driver.run(), "driver"):
        await client.create(REPLICASETS, _rs("web", 2))
        await client.create(POD_DISRUPTION_BUDGETS, _pdb("web", "web", minAvailable=2))
        await eventually(lambda: _status(client, "web", currentHealthy=2, disruptionsAllowed=0))
        driver.node_name = "n2"  # new pods land on n2 from now on

        kubectl = Kubectl(server.url, str(tmp_path / "home"))
        proc = kubectl.popen("drain", "n1", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=120s")
        try:
            def first_refusal() -> str:
                seen = ""
                assert proc.stderr is not None
                for line in proc.stderr:
                    seen += line
                    if "disruption budget" in line:
                        return seen
                return seen
            refused = await asyncio.wait_for(asyncio.to_thread(first_refusal), 60)
            assert "Cannot evict pod as it would violate the pod's disruption budget." in refused
            assert (await client.get(NODES, None, "n1"))["spec"].get("unschedulable") is True
            assert len(await _live(client, "web")) == 2  # nothing evicted yet

            await client.patch(REPLICASETS, "default", "web", {"spec": {"replicas": 3}}, patch_type=PatchType.MERGE)
            ready_on_n2.set()
            driver.release()  # re-run the outcome for the pod already there
            out, err = await asyncio.wait_for(asyncio.to_thread(proc.communicate), 120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert proc.returncode == 0, err
        assert "node/n1 drained" in out
        pods = (await client.list(PODS, "default"))["items"]
        assert not [p for p in pods if p["spec"].get("nodeName") == "n1"]
