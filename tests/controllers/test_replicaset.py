"""The ReplicaSet controller against a real API server, with the pod driver
playing the kubelet."""

from __future__ import annotations

import asyncio

from k8py.client.resources import CORE_EVENTS, PODS, REPLICASETS, REPLICATION_CONTROLLERS
from k8py.client.rest import PatchType
from tests.controllers.conftest import eventually


def replicaset(name: str, replicas: int, *, labels: dict | None = None, min_ready: int = 0, image: str = "nginx") -> dict:
    labels = labels or {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas, "minReadySeconds": min_ready, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": image}]}}},
    }


async def pods_of(client, selector: str) -> list[dict]:
    return (await client.list(PODS, "default", label_selector=selector))["items"]


async def active(client, selector: str) -> list[dict]:
    return [p for p in await pods_of(client, selector) if not p["metadata"].get("deletionTimestamp")]


async def test_creates_the_replicas_owned_by_it_and_reports_status(client, start_manager, driver):
    await start_manager("replicaset")
    rs = await client.create(REPLICASETS, replicaset("web", 3))
    async def ready():
        cur = await client.get(REPLICASETS, "default", "web")
        st = cur.get("status") or {}
        return st.get("readyReplicas") == 3 and st.get("availableReplicas") == 3 and st.get("observedGeneration") == 1
    await eventually(ready)
    pods = await pods_of(client, "app=web")
    assert len(pods) == 3
    for pod in pods:
        ref = pod["metadata"]["ownerReferences"][0]
        assert ref == {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": rs["metadata"]["uid"],
                       "controller": True, "blockOwnerDeletion": True}
        assert pod["metadata"]["generateName"] == "web-"
    st = (await client.get(REPLICASETS, "default", "web"))["status"]
    assert st["replicas"] == 3 and st["fullyLabeledReplicas"] == 3


async def test_scales_down_deleting_the_least_valuable_pods_first(client, start_manager):
    from tests.support.pod_driver import PodDriver
    from tests.controllers.conftest import running

    # pods named in the "keep" set become Ready; the others stay Pending
    keep: set[str] = set()
    driver = PodDriver(client, outcome=lambda pod: "Ready" if pod["metadata"]["name"] in keep else None)
    async with running(driver.run(), "driver"):
        await start_manager("replicaset")
        await client.create(REPLICASETS, replicaset("web", 4))
        await eventually(lambda: _count(client, "app=web", 4))
        names = sorted(p["metadata"]["name"] for p in await pods_of(client, "app=web"))
        keep.update(names[:2])
        driver.release()
        await eventually(lambda: _ready(client, "web", 2))
        await client.patch(REPLICASETS, "default", "web", {"spec": {"replicas": 2}})
        await eventually(lambda: _count(client, "app=web", 2))
        assert sorted(p["metadata"]["name"] for p in await active(client, "app=web")) == names[:2]


async def _count(client, selector: str, n: int) -> bool:
    return len(await active(client, selector)) == n


async def _ready(client, name: str, n: int) -> bool:
    return ((await client.get(REPLICASETS, "default", name)).get("status") or {}).get("readyReplicas") == n


async def test_adopts_orphans_and_releases_pods_that_stop_matching(client, start_manager, driver):
    orphan = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "orphan", "namespace": "default", "labels": {"app": "web"}},
              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    await client.create(PODS, orphan)
    await start_manager("replicaset")
    rs = await client.create(REPLICASETS, replicaset("web", 2))
    await eventually(lambda: _count(client, "app=web", 2))
    adopted = await client.get(PODS, "default", "orphan")
    assert adopted["metadata"]["ownerReferences"][0]["uid"] == rs["metadata"]["uid"]
    # relabel it: it is released and replaced
    await client.patch(PODS, "default", "orphan", {"metadata": {"labels": {"app": "other"}}})
    async def released():
        pod = await client.get(PODS, "default", "orphan")
        return not pod["metadata"].get("ownerReferences")
    await eventually(released)
    await eventually(lambda: _count(client, "app=web", 2))


async def test_failing_creates_set_replica_failure_until_they_succeed(client, start_manager, proxy, driver):
    proxy.reject("POST", r"/namespaces/default/pods$", 403, 'pods "bad" is forbidden: exceeded quota: compute')
    await start_manager("replicaset", via=proxy.url)
    await client.create(REPLICASETS, replicaset("bad", 5))

    async def failure():
        st = (await client.get(REPLICASETS, "default", "bad")).get("status") or {}
        return next((c for c in st.get("conditions") or () if c["type"] == "ReplicaFailure"), None)

    cond = await eventually(failure)
    assert cond["reason"] == "FailedCreate" and cond["status"] == "True"
    assert "exceeded quota" in cond["message"]
    events = (await client.list(CORE_EVENTS, "default"))["items"]
    failed = [e for e in events if e["reason"] == "FailedCreate" and e["involvedObject"]["name"] == "bad"]
    assert failed and failed[0]["source"]["component"] == "replicaset-controller"
    assert failed[0]["type"] == "Warning" and "Error creating: " in failed[0]["message"]

    proxy.clear_rejections()
    await eventually(lambda: _count(client, "app=bad", 5))

    async def cleared():
        st = (await client.get(REPLICASETS, "default", "bad")).get("status") or {}
        return st.get("readyReplicas") == 5 and not st.get("conditions")

    await eventually(cleared)


async def test_replication_controller_keeps_its_replicas(client, start_manager, driver):
    await start_manager("replicationcontroller")
    rc = {"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "rc", "namespace": "default"},
          "spec": {"replicas": 2, "selector": {"app": "rc"},
                   "template": {"metadata": {"labels": {"app": "rc"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}
    await client.create(REPLICATION_CONTROLLERS, rc)
    await eventually(lambda: _count(client, "app=rc", 2))
    await client.patch(REPLICATION_CONTROLLERS, "default", "rc", {"spec": {"replicas": 4}}, subresource="scale")
    await eventually(lambda: _count(client, "app=rc", 4))
    async def ready():
        st = (await client.get(REPLICATION_CONTROLLERS, "default", "rc")).get("status") or {}
        return st.get("readyReplicas") == 4
    await eventually(ready)
    pods = await pods_of(client, "app=rc")
    assert {p["metadata"]["ownerReferences"][0]["kind"] for p in pods} == {"ReplicationController"}


async def test_a_lagging_watch_never_makes_it_overshoot(client, start_manager, proxy):
    """The manager's watches arrive a second late; every sync in between
    (status writes re-queue the ReplicaSet) must trust its expectations."""
    from tests.controllers.conftest import running

    added: list[str] = []

    async def watch_pods():
        rv = (await client.list(PODS, "default"))["metadata"]["resourceVersion"]
        async with client.watch(PODS, "default", resource_version=rv) as stream:
            async for event in stream:
                if event.type == "ADDED":
                    added.append(event.object["metadata"]["name"])

    async with running(watch_pods(), "pod-watch"):
        proxy.watch_lag = 1.0
        await start_manager("replicaset", via=proxy.url)
        await client.create(REPLICASETS, replicaset("web", 5))

        async def seen(n: int):
            st = (await client.get(REPLICASETS, "default", "web")).get("status") or {}
            return st.get("replicas") == n

        await eventually(lambda: seen(5))
        await client.patch(REPLICASETS, "default", "web", {"spec": {"replicas": 8}})
        await eventually(lambda: seen(8))
        await eventually(lambda: len(added) >= 8)
        assert len((await client.list(PODS, "default"))["items"]) == 8
        assert len(added) == 8, added
