"""The Deployment controller against a real API server, with the pod driver
playing the kubelet: rollouts asserted event by event from a pod watch."""

from __future__ import annotations

import asyncio
from typing import Any

from k8py.client.resources import DEPLOYMENTS, PODS, REPLICASETS
from k8py.controllers.pod_status import is_pod_ready
from tests.controllers.conftest import eventually, running


def deployment(name: str, replicas: int, *, image: str = "nginx:1", strategy: dict | None = None, **spec: Any) -> dict:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                 "strategy": strategy or {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1}},
                 "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": image}]}}, **spec},
    }


async def complete(client, name: str, replicas: int, generation: int | None = None) -> bool:
    d = await client.get(DEPLOYMENTS, "default", name)
    st = d.get("status") or {}
    progressing = next((c for c in st.get("conditions") or () if c["type"] == "Progressing"), {})
    return (st.get("observedGeneration") == d["metadata"]["generation"] and st.get("updatedReplicas", 0) == replicas
            and st.get("replicas", 0) == replicas and st.get("availableReplicas", 0) == replicas
            and progressing.get("reason") == "NewReplicaSetAvailable")


async def replica_sets(client, name: str) -> list[dict]:
    items = (await client.list(REPLICASETS, "default", label_selector=f"app={name}"))["items"]
    return sorted(items, key=lambda rs: int(rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]))


class PodCensus:
    """Follows pods from a watch and checks bounds after every event."""

    def __init__(self, client, selector: str) -> None:
        self.client, self.selector = client, selector
        self.pods: dict[str, dict] = {}
        self.max_total = 0
        self.min_ready: int | None = None
        self.events = 0
        self.both_at_once = False

    def total(self) -> int:
        return len(self.pods)

    def ready(self) -> int:
        return sum(1 for p in self.pods.values() if is_pod_ready(p))

    async def run(self, start_rv: str) -> None:
        async with self.client.watch(PODS, "default", resource_version=start_rv, label_selector=self.selector) as stream:
            async for event in stream:
                if event.type == "BOOKMARK":
                    continue
                name = event.object["metadata"]["name"]
                if event.type == "DELETED" or event.object["metadata"].get("deletionTimestamp"):
                    self.pods.pop(name, None)
                else:
                    self.pods[name] = event.object
                self.events += 1
                self.max_total = max(self.max_total, self.total())
                self.min_ready = self.ready() if self.min_ready is None else min(self.min_ready, self.ready())
                hashes = {p["metadata"]["labels"].get("pod-template-hash") for p in self.pods.values()}
                self.both_at_once = self.both_at_once or len(hashes) > 1


async def test_rolling_update_stays_within_max_surge_and_max_unavailable(client, start_manager, driver):
    await start_manager("deployment", "replicaset")
    await client.create(DEPLOYMENTS, deployment("web", 4))
    await eventually(lambda: complete(client, "web", 4), timeout=60)
    listing = await client.list(PODS, "default", label_selector="app=web")
    census = PodCensus(client, "app=web")
    census.pods = {p["metadata"]["name"]: p for p in listing["items"]}
    async with running(census.run(listing["metadata"]["resourceVersion"]), "census"):
        await client.patch(DEPLOYMENTS, "default", "web", {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}}})
        await eventually(lambda: complete(client, "web", 4), timeout=60)
        await eventually(lambda: census.total() == 4 and census.ready() == 4)
    assert census.events > 8  # the rollout was observed pod by pod
    assert census.max_total <= 4 + 1, census.max_total
    assert census.min_ready is not None and census.min_ready >= 4 - 1, census.min_ready
    d = await client.get(DEPLOYMENTS, "default", "web")
    assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
    old, new = await replica_sets(client, "web")
    assert old["spec"]["replicas"] == 0 and new["spec"]["replicas"] == 4
    assert new["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:2"
    assert new["metadata"]["name"] == f"web-{new['metadata']['labels']['pod-template-hash']}"
    assert new["metadata"]["annotations"]["deployment.kubernetes.io/desired-replicas"] == "4"
    assert new["metadata"]["annotations"]["deployment.kubernetes.io/max-replicas"] == "5"
    available = next(c for c in d["status"]["conditions"] if c["type"] == "Available")
    assert available["status"] == "True" and available["reason"] == "MinimumReplicasAvailable"


async def test_max_unavailable_zero_never_drops_a_ready_pod(client, start_manager, driver):
    await start_manager("deployment", "replicaset")
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "50%", "maxUnavailable": 0}}
    await client.create(DEPLOYMENTS, deployment("zero", 4, strategy=strategy))
    await eventually(lambda: complete(client, "zero", 4), timeout=60)
    listing = await client.list(PODS, "default", label_selector="app=zero")
    census = PodCensus(client, "app=zero")
    census.pods = {p["metadata"]["name"]: p for p in listing["items"]}
    async with running(census.run(listing["metadata"]["resourceVersion"]), "census"):
        await client.patch(DEPLOYMENTS, "default", "zero", {"spec": {"template": {"metadata": {"annotations": {"x": "y"}}}}})
        await eventually(lambda: complete(client, "zero", 4), timeout=60)
        await eventually(lambda: census.total() == 4 and census.ready() == 4)
    assert census.max_total <= 6 and census.min_ready >= 4


async def test_recreate_removes_every_old_pod_before_creating_new_ones(client, start_manager, driver):
    await start_manager("deployment", "replicaset")
    await client.create(DEPLOYMENTS, deployment("re", 3, strategy={"type": "Recreate"}))
    await eventually(lambda: complete(client, "re", 3), timeout=60)
    listing = await client.list(PODS, "default", label_selector="app=re")
    census = PodCensus(client, "app=re")
    census.pods = {p["metadata"]["name"]: p for p in listing["items"]}
    async with running(census.run(listing["metadata"]["resourceVersion"]), "census"):
        await client.patch(DEPLOYMENTS, "default", "re", {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}}})
        await eventually(lambda: complete(client, "re", 3), timeout=60)
        await eventually(lambda: census.total() == 3 and census.ready() == 3)
    assert not census.both_at_once
    assert census.min_ready == 0


async def test_proportional_scaling_of_a_rollout_in_progress(client, start_manager):
    from tests.support.pod_driver import PodDriver

    # pods of the first template become ready, pods of the second never do: the rollout stalls
    driver = PodDriver(client, outcome=lambda pod: "Ready" if pod["spec"]["containers"][0]["image"] == "nginx:1" else "Running")
    async with running(driver.run(), "driver"):
        await start_manager("deployment", "replicaset")
        strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 3, "maxUnavailable": 2}}
        await client.create(DEPLOYMENTS, deployment("prop", 10, strategy=strategy))
        await eventually(lambda: complete(client, "prop", 10), timeout=60)
        await client.patch(DEPLOYMENTS, "default", "prop", {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}}})

        async def stalled():
            rss = await replica_sets(client, "prop")
            return len(rss) == 2 and rss[0]["spec"]["replicas"] == 8 and rss[1]["spec"]["replicas"] == 5
        await eventually(stalled, timeout=60)
        await client.patch(DEPLOYMENTS, "default", "prop", {"spec": {"replicas": 20}})

        async def scaled():
            rss = await replica_sets(client, "prop")
            return [rs["spec"]["replicas"] for rs in rss] == [14, 9]
        # 13 pods -> 23 (20 + maxSurge 3): each grows by size * 23/13 (its max-replicas annotation),
        # rounded: 8 -> 14, 5 -> 9, no leftover
        await eventually(scaled, timeout=30)
        rss = await replica_sets(client, "prop")
        assert all(rs["metadata"]["annotations"]["deployment.kubernetes.io/desired-replicas"] == "20" for rs in rss)


async def test_a_rollout_that_does_not_progress_exceeds_its_deadline(client, start_manager):
    from tests.support.pod_driver import PodDriver

    driver = PodDriver(client, outcome=lambda pod: "Running")  # never ready
    async with running(driver.run(), "driver"):
        await start_manager("deployment", "replicaset")
        await client.create(DEPLOYMENTS, deployment("stuck", 2, progressDeadlineSeconds=2))

        async def timed_out():
            st = (await client.get(DEPLOYMENTS, "default", "stuck")).get("status") or {}
            c = next((c for c in st.get("conditions") or () if c["type"] == "Progressing"), {})
            return c if c.get("reason") == "ProgressDeadlineExceeded" else None

        c = await eventually(timed_out, timeout=60)
        assert c["status"] == "False" and "has timed out progressing" in c["message"]
        st = (await client.get(DEPLOYMENTS, "default", "stuck"))["status"]
        available = next(c for c in st["conditions"] if c["type"] == "Available")
        assert available["status"] == "False" and available["reason"] == "MinimumReplicasUnavailable"


async def test_old_replica_sets_beyond_the_history_limit_are_deleted(client, start_manager, driver):
    await start_manager("deployment", "replicaset")
    await client.create(DEPLOYMENTS, deployment("hist", 1, revisionHistoryLimit=1))
    for image in ("nginx:2", "nginx:3", "nginx:4"):
        await eventually(lambda: complete(client, "hist", 1), timeout=60)
        await client.patch(DEPLOYMENTS, "default", "hist", {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": image}]}}}})
    await eventually(lambda: complete(client, "hist", 1), timeout=60)

    async def pruned():
        rss = await replica_sets(client, "hist")
        return [rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"] for rs in rss] == ["3", "4"]

    await eventually(pruned, timeout=30)
