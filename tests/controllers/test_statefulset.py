"""The StatefulSet controller against a real API server: ordered start and
scale-down (asserted from a watch), Parallel, partitioned rolling update, and
``kubectl rollout status|history|undo``."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from k8py.api.errors import NotFound
from k8py.client.resources import CORE_EVENTS, PODS, STATEFULSETS
from k8py.controllers.revision_control import CONTROLLER_REVISIONS
from tests.controllers.conftest import eventually
from tests.support.kube import Kubectl


def _sts(replicas: int = 3, image: str = "db:1", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
            "spec": {"replicas": replicas, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                     "template": {"metadata": {"labels": {"app": "db"}},
                                  "spec": {"containers": [{"name": "db", "image": image}]}},
                     "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                         "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}],
                     **spec}}


def _ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in (pod.get("status") or {}).get("conditions") or ())


async def _pods(client) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in (await client.list(PODS, "default"))["items"]
            if not p["metadata"].get("deletionTimestamp")}


async def _ready_set(client, names: list[str], image: str | None = None) -> bool:
    pods = await _pods(client)
    return sorted(pods) == sorted(names) and all(_ready(p) for p in pods.values()) and (
        image is None or all(p["spec"]["containers"][0]["image"] == image for p in pods.values()))


@contextlib.asynccontextmanager
async def _recording(client, log: list[tuple[str, str, bool]]):
    """Record (event type, pod name, ready) for every pod event while inside."""
    start = (await client.list(PODS, "default"))["metadata"]["resourceVersion"]

    async def watch() -> None:
        async for event in client.watch(PODS, "default", resource_version=start):
            if event.type != "BOOKMARK":
                log.append((event.type, event.object["metadata"]["name"], _ready(event.object)))

    task = asyncio.create_task(watch(), name="sts-watch")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_ordered_ready_creates_each_pod_after_the_previous_is_ready(client, start_manager, driver) -> None:
    await start_manager("statefulset")
    log: list[tuple[str, str, bool]] = []
    async with _recording(client, log):
        await client.create(STATEFULSETS, _sts(3), namespace="default")
        await eventually(lambda: _ready_set(client, ["db-0", "db-1", "db-2"]))
    added = [name for kind, name, _ in log if kind == "ADDED"]
    assert added == ["db-0", "db-1", "db-2"]
    for later, earlier in (("db-1", "db-0"), ("db-2", "db-1")):
        created_at = next(i for i, (k, n, _) in enumerate(log) if k == "ADDED" and n == later)
        assert any(n == earlier and ready for _, n, ready in log[:created_at]), (later, log)
    pod = (await _pods(client))["db-1"]
    assert pod["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"] == "db-1"
    assert pod["metadata"]["labels"]["apps.kubernetes.io/pod-index"] == "1"
    assert pod["spec"]["hostname"] == "db-1" and pod["spec"]["subdomain"] == "db"
    assert "volumes" not in pod["spec"]  # no claims yet
    sts = await client.get(STATEFULSETS, "default", "db")
    assert sts["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "data"
    messages = await eventually(lambda: _event_messages(client, 3))
    assert "create Pod db-0 in StatefulSet db successful" in messages

    # scale down: highest ordinal first, one at a time
    log.clear()
    async with _recording(client, log):
        await client.patch(STATEFULSETS, "default", "db", {"spec": {"replicas": 1}})
        await eventually(lambda: _ready_set(client, ["db-0"]))
        await eventually(lambda: len([e for e in log if e[0] == "DELETED"]) == 2)
    deleted = [name for kind, name, _ in log if kind == "DELETED"]
    assert deleted == ["db-2", "db-1"]


async def test_parallel_creates_all_pods_without_waiting(client, start_manager, driver) -> None:
    driver.outcome = lambda pod: None  # nothing ever becomes ready
    await start_manager("statefulset")
    await client.create(STATEFULSETS, _sts(3, podManagementPolicy="Parallel", ordinals={"start": 5}),
                        namespace="default")
    await eventually(lambda: _names(client, ["db-5", "db-6", "db-7"]))
    await client.patch(STATEFULSETS, "default", "db", {"spec": {"replicas": 1}})
    await eventually(lambda: _names(client, ["db-5"]))  # Parallel: no waiting on unready pods


async def _event_messages(client, at_least: int) -> list[str] | None:
    events = (await client.list(CORE_EVENTS, "default"))["items"]
    messages = [e.get("message") for e in events if e.get("reason") == "SuccessfulCreate"]
    return messages if len(messages) >= at_least else None


async def _names(client, names: list[str]) -> bool:
    return sorted(await _pods(client)) == names


async def test_a_partitioned_rolling_update_updates_only_ordinals_at_or_above_the_partition(client, start_manager, driver) -> None:
    await start_manager("statefulset")
    await client.create(STATEFULSETS, _sts(3, updateStrategy={"type": "RollingUpdate",
                                                              "rollingUpdate": {"partition": 1}}), namespace="default")
    await eventually(lambda: _ready_set(client, ["db-0", "db-1", "db-2"], "db:1"))
    log: list[tuple[str, str, bool]] = []
    async with _recording(client, log):
        await client.patch(STATEFULSETS, "default", "db",
                           {"spec": {"template": {"spec": {"containers": [{"name": "db", "image": "db:2"}]}}}})
        await eventually(lambda: _images(client, {"db-0": "db:1", "db-1": "db:2", "db-2": "db:2"}))
        await eventually(lambda: _ready_set(client, ["db-0", "db-1", "db-2"]))
    deleted = [name for kind, name, _ in log if kind == "DELETED"]
    assert deleted == ["db-2", "db-1"]  # highest first; db-0 is below the partition
    sts = await eventually(lambda: _sts_where(client, updatedReplicas=2, readyReplicas=3))
    assert sts["status"]["currentRevision"] != sts["status"]["updateRevision"]
    assert sts["status"]["currentReplicas"] == 1

    # lifting the partition finishes the rollout
    await client.patch(STATEFULSETS, "default", "db", {"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}})
    await eventually(lambda: _images(client, {"db-0": "db:2", "db-1": "db:2", "db-2": "db:2"}))
    sts = await eventually(lambda: _sts_where(client, updatedReplicas=3, readyReplicas=3, currentReplicas=3))
    assert sts["status"]["currentRevision"] == sts["status"]["updateRevision"]


async def test_on_delete_replaces_a_pod_only_when_it_is_deleted(client, start_manager, driver) -> None:
    await start_manager("statefulset")
    await client.create(STATEFULSETS, _sts(2, updateStrategy={"type": "OnDelete"}), namespace="default")
    await eventually(lambda: _ready_set(client, ["db-0", "db-1"], "db:1"))
    await client.patch(STATEFULSETS, "default", "db",
                       {"spec": {"template": {"spec": {"containers": [{"name": "db", "image": "db:2"}]}}}})
    await eventually(lambda: _sts_where(client, observedGeneration=2))
    assert await _images(client, {"db-0": "db:1", "db-1": "db:1"})
    await client.delete(PODS, "default", "db-0")
    await eventually(lambda: _images(client, {"db-0": "db:2", "db-1": "db:1"}))


async def _images(client, want: dict[str, str]) -> bool:
    pods = await _pods(client)
    return {n: p["spec"]["containers"][0]["image"] for n, p in pods.items()} == want


async def _sts_where(client, **want: Any) -> dict[str, Any] | None:
    sts = await client.get(STATEFULSETS, "default", "db")
    status = sts.get("status") or {}
    return sts if all(status.get(k) == v for k, v in want.items()) else None


@pytest.mark.kubectl
async def test_kubectl_rollout_undo_of_a_statefulset(client, server, start_manager, driver, tmp_path) -> None:
    await start_manager("statefulset")
    await client.create(STATEFULSETS, _sts(2), namespace="default")
    await eventually(lambda: _ready_set(client, ["db-0", "db-1"], "db:1"))
    k = Kubectl(server.url, str(tmp_path / "home"))
    await asyncio.to_thread(k.run, "set", "image", "statefulset/db", "db=db:2")
    out = await asyncio.to_thread(k.run, "rollout", "status", "statefulset/db", "--timeout=60s")
    # partition defaults to 0, so kubectl reports a (trivially) partitioned rollout, as upstream
    assert "partitioned roll out complete: 2 new pods have been updated" in out.stdout
    assert await _images(client, {"db-0": "db:2", "db-1": "db:2"})
    history = (await asyncio.to_thread(k.run, "rollout", "history", "statefulset/db")).stdout
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2"]
    await asyncio.to_thread(k.run, "rollout", "undo", "statefulset/db")
    await eventually(lambda: _images(client, {"db-0": "db:1", "db-1": "db:1"}))
    await asyncio.to_thread(k.run, "rollout", "status", "statefulset/db", "--timeout=60s")
    await asyncio.to_thread(k.run, "scale", "statefulset/db", "--replicas=3")
    await eventually(lambda: _ready_set(client, ["db-0", "db-1", "db-2"], "db:1"))
    revisions = (await client.list(CONTROLLER_REVISIONS, "default"))["items"]
    assert sorted(r["revision"] for r in revisions) == [2, 3]  # revision 1 came back as 3
    history = (await asyncio.to_thread(k.run, "rollout", "history", "statefulset/db")).stdout
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["2", "3"]


async def test_a_recreated_set_adopts_the_pods_and_history_an_orphaning_delete_left(client, start_manager, driver) -> None:
    await start_manager("statefulset", "garbagecollector")
    await client.create(STATEFULSETS, _sts(2), namespace="default")
    await eventually(lambda: _ready_set(client, ["db-0", "db-1"], "db:1"))
    before = {n: p["metadata"]["uid"] for n, p in (await _pods(client)).items()}
    revision_names = {r["metadata"]["name"] for r in (await client.list(CONTROLLER_REVISIONS, "default"))["items"]}
    await client.delete(STATEFULSETS, "default", "db", propagation_policy="Orphan")

    async def orphaned() -> bool:
        # the pods lose their owner first; the set itself goes once the garbage collector has
        # taken off its orphan finalizer (a create before that is AlreadyExists, as upstream)
        pods = (await _pods(client)).values()
        if len(pods) != 2 or any(p["metadata"].get("ownerReferences") for p in pods):
            return False
        try:
            await client.get(STATEFULSETS, "default", "db")
        except NotFound:
            return True
        return False

    await eventually(orphaned)
    created = await client.create(STATEFULSETS, _sts(2), namespace="default")

    async def adopted() -> bool:
        pods = (await _pods(client)).values()
        return len(pods) == 2 and all((p["metadata"].get("ownerReferences") or [{}])[0].get("uid")
                                      == created["metadata"]["uid"] for p in pods)

    await eventually(adopted)
    assert {n: p["metadata"]["uid"] for n, p in (await _pods(client)).items()} == before  # kept, not recreated
    revisions = (await client.list(CONTROLLER_REVISIONS, "default"))["items"]
    assert {r["metadata"]["name"] for r in revisions} == revision_names
    assert all(r["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"] for r in revisions)


async def test_min_ready_seconds_holds_back_the_next_pod_and_counts_available(client, start_manager, driver) -> None:
    from datetime import datetime, timedelta, timezone

    from k8py.client.clock import FakeClock

    clock = FakeClock(start=datetime.now(timezone.utc) + timedelta(seconds=5))
    await start_manager("statefulset", clock=clock)
    await client.create(STATEFULSETS, _sts(2, minReadySeconds=30), namespace="default")

    async def ticking(check):  # the informers' sync waits poll on the fake clock too
        await clock.step(0.1)
        return await check()

    await eventually(lambda: ticking(lambda: _ready_set(client, ["db-0"])))
    await eventually(lambda: _sts_where(client, readyReplicas=1, availableReplicas=0))
    assert sorted(await _pods(client)) == ["db-0"]  # ready, but not yet available: db-1 waits
    assert clock.now() < datetime.now(timezone.utc) + timedelta(seconds=25)  # well inside the 30 s
    await clock.step(31)
    await eventually(lambda: _ready_set(client, ["db-0", "db-1"]))
    await clock.step(31)
    sts = await eventually(lambda: ticking(lambda: _sts_where(client, readyReplicas=2, availableReplicas=2)))
    assert sts["status"]["replicas"] == 2
