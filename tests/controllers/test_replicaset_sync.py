"""ReplicaSet ``sync`` on hand-filled listers with a fake clock (no informers
running), writes going to a real API server: what one sync does."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from k8py.client.clock import FakeClock
from k8py.client.event_recorder import EventBroadcaster
from k8py.client.informer_factory import InformerFactory
from k8py.client.resources import PODS, REPLICASETS
from k8py.controllers.context import ControllerContext
from k8py.controllers.expectations import ControllerExpectations
from k8py.controllers.pod_control import slow_start_batch
from k8py.controllers.pod_ranking import pods_to_delete
from k8py.controllers.pod_status import format_time
from k8py.controllers.replicaset import ReplicaSetController, calculate_status
from tests.controllers.test_replicaset import replicaset


@pytest.fixture
async def controller(client):
    clock = FakeClock()
    ctx = ControllerContext(client=client, informers=InformerFactory(client), broadcaster=EventBroadcaster(client, clock=clock), clock=clock)
    return ReplicaSetController(ctx)


def pod(name: str, *, phase: str = "Running", ready: bool = True, node: str = "", ready_since: str = "2025-01-01T00:00:00Z",
        created: str = "2024-12-31T00:00:00Z", restarts: int = 0, owner: dict | None = None, labels: dict | None = None) -> dict:
    return {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": labels or {"app": "web"},
                     "creationTimestamp": created, "resourceVersion": "1", **({"ownerReferences": [owner]} if owner else {})},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
        "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": ready_since}],
                   "containerStatuses": [{"name": "c", "restartCount": restarts}]},
    }


async def test_a_sync_whose_creations_are_not_yet_seen_creates_nothing_more(client, controller):
    rs = await client.create(REPLICASETS, replicaset("web", 3))
    controller.informer.indexer.add(rs)
    await controller.sync("default/web")
    assert len((await client.list(PODS, "default"))["items"]) == 3
    assert controller.expectations.get("default/web") == (3, 0)
    # the pod cache never saw them (a lagging watch): the next sync must not create again
    controller.informer.indexer.update(await client.get(REPLICASETS, "default", "web"))
    await controller.sync("default/web")
    assert len((await client.list(PODS, "default"))["items"]) == 3
    # once they are observed, expectations are satisfied
    for p in (await client.list(PODS, "default"))["items"]:
        controller.pod_informer.indexer.add(p)
        controller._add_pod(p)
    assert controller.expectations.satisfied("default/web")


async def test_creations_the_server_acknowledged_count_before_the_cache_shows_them(client):
    """The next burst starts before the watch delivers the last one, and the
    pods in flight are counted, so the total never passes spec.replicas."""
    clock = FakeClock()
    ctx = ControllerContext(client=client, informers=InformerFactory(client), broadcaster=EventBroadcaster(client, clock=clock), clock=clock)
    controller = ReplicaSetController(ctx, burst_replicas=3)
    rs = await client.create(REPLICASETS, replicaset("web", 7))
    controller.informer.indexer.add(rs)
    for created in (3, 6, 7, 7):  # the pod cache never sees any of them
        await controller.sync("default/web")
        assert len((await client.list(PODS, "default"))["items"]) == created
    assert controller.expectations.get("default/web") == (7, 0)
    # once some arrive, they count once: from the cache, no longer in flight
    pods = (await client.list(PODS, "default"))["items"]
    for p in pods[:4]:
        controller.pod_informer.indexer.add(p)
        controller._add_pod(p)
    assert controller.expectations.creations_in_flight("default/web", controller.pod_informer.indexer.__contains__) == 3
    await controller.sync("default/web")
    assert len((await client.list(PODS, "default"))["items"]) == 7


async def test_creations_wait_while_a_deletion_is_unobserved_and_trust_the_cache_once_expired(client):
    clock = FakeClock()
    ctx = ControllerContext(client=client, informers=InformerFactory(client), broadcaster=EventBroadcaster(client, clock=clock), clock=clock)
    controller = ReplicaSetController(ctx)
    rs = await client.create(REPLICASETS, replicaset("web", 2))
    controller.informer.indexer.add(rs)
    controller.expectations.expect_deletions_of("default/web", ["default/gone"])
    await controller.sync("default/web")
    assert (await client.list(PODS, "default"))["items"] == []  # upstream: nothing while a deletion is unseen
    clock.advance(301)  # the record expires: the cache alone is trusted again
    await controller.sync("default/web")
    assert len((await client.list(PODS, "default"))["items"]) == 2
    clock.advance(301)  # and the two unseen creations are forgotten with their record
    await controller.sync("default/web")
    assert len((await client.list(PODS, "default"))["items"]) == 4


async def test_expectations_expire_after_five_minutes_of_the_clock():
    clock = FakeClock()
    exp = ControllerExpectations(clock=clock)
    exp.expect_creations("k", 2)
    exp.creation_observed("k")
    assert not exp.satisfied("k")
    clock.advance(299)
    assert not exp.satisfied("k")
    clock.advance(2)
    assert exp.satisfied("k")


async def test_slow_start_stops_at_the_first_failing_batch():
    calls = 0

    async def fail_after(n: int):
        nonlocal calls
        calls += 1
        if calls > n:
            raise RuntimeError("quota")

    assert await slow_start_batch(10, 1, lambda: fail_after(100)) == (10, None)
    calls = 0
    successes, error = await slow_start_batch(10, 1, lambda: fail_after(0))
    assert (successes, calls, str(error)) == (0, 1, "quota")
    calls = 0
    successes, error = await slow_start_batch(100, 1, lambda: fail_after(4))
    # never more started than the batches 1, 2, 4, ... allow once the earlier ones succeeded
    assert successes == 4 and 5 <= calls <= 1 + 2 * successes and str(error) == "quota"


async def test_slow_start_does_not_wait_for_the_slowest_call_of_a_batch():
    """The window moves on as each call returns: one call that hangs holds up
    no others (upstream's batches would stop at the batch it is in)."""
    release = asyncio.Event()
    finished = 0
    first = True

    async def call():
        nonlocal finished, first
        if first:
            first = False
            await release.wait()
        else:
            await asyncio.sleep(0)
        finished += 1

    run = asyncio.ensure_future(slow_start_batch(50, 1, call))
    await asyncio.sleep(0)
    assert finished == 0  # only the first call started, and it hangs: the window has not grown
    release.set()
    assert await asyncio.wait_for(run, 30) == (50, None)
    finished = 0
    first = True
    release.clear()
    run = asyncio.ensure_future(slow_start_batch(50, 2, call))
    for _ in range(1000):
        if finished == 49:
            break
        await asyncio.sleep(0)
    assert finished == 49 and not run.done()  # all the others ran past the one that hangs
    release.set()
    assert await asyncio.wait_for(run, 30) == (50, None)


async def test_slow_start_cancelled_cancels_the_calls_in_flight():
    started, cancelled = 0, 0

    async def call():
        nonlocal started, cancelled
        started += 1
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled += 1
            raise

    run = asyncio.ensure_future(slow_start_batch(10, 4, call))
    for _ in range(10):
        await asyncio.sleep(0)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert started == 4 and cancelled == 4


def test_deletion_order_prefers_unassigned_pending_unready_newer_restarted():
    now = FakeClock().now()
    old = format_time(now - timedelta(hours=10))
    recent = format_time(now - timedelta(seconds=5))
    pods = [
        pod("ready-old", node="n1", ready_since=old),
        pod("unassigned", phase="Pending", ready=False, node=""),
        pod("pending", phase="Pending", ready=False, node="n1"),
        pod("not-ready", ready=False, node="n1"),
        pod("ready-recent", node="n1", ready_since=recent),
        pod("restarted", node="n1", ready_since=old, restarts=5),
    ]
    order = [p["metadata"]["name"] for p in pods_to_delete(pods, pods, len(pods) - 1, now)]
    assert order == ["unassigned", "pending", "not-ready", "ready-recent", "restarted"]


def test_doubled_up_nodes_are_thinned_first():
    now = FakeClock().now()
    pods = [pod("a", node="n1"), pod("b", node="n1"), pod("c", node="n2")]
    assert pods_to_delete(pods, pods, 1, now)[0]["metadata"]["name"] in ("a", "b")


def test_status_counts_available_pods_only_after_min_ready_seconds():
    now = FakeClock().now()
    rs = replicaset("web", 2, min_ready=30)
    pods = [pod("a", ready_since=format_time(now - timedelta(seconds=60))), pod("b", ready_since=format_time(now - timedelta(seconds=10)))]
    status = calculate_status(rs, pods, None, now)
    assert status == {"replicas": 2, "fullyLabeledReplicas": 2, "readyReplicas": 2, "availableReplicas": 1}
    failed = calculate_status(rs, pods[:1], RuntimeError("quota"), now)
    assert failed["conditions"][0]["type"] == "ReplicaFailure" and failed["conditions"][0]["reason"] == "FailedCreate"
    rs["status"] = failed
    assert "conditions" not in calculate_status(rs, pods, None, now)


def test_partly_labelled_pods_are_not_fully_labelled():
    now = FakeClock().now()
    rs = replicaset("web", 1, labels={"app": "web"})
    rs["spec"]["template"]["metadata"]["labels"]["tier"] = "front"
    status = calculate_status(rs, [pod("a", labels={"app": "web"})], None, now)
    assert status["replicas"] == 1 and "fullyLabeledReplicas" not in status


def test_the_next_sync_starts_from_the_biggest_batch_that_succeeded():
    from k8py.controllers.pod_control import largest_batch as _largest_batch

    assert _largest_batch(500, 1) == 245  # 1, 2, 4, ..., 128, then the 245 left
    assert _largest_batch(500, 245) == 255
    assert _largest_batch(1, 1) == 1


async def test_a_sync_right_after_its_own_status_write_starts_from_what_it_wrote(client):
    """The cache has not seen the status write yet: the next sync must not PUT
    from the stale resourceVersion (a conflict, a GET and a second PUT each time)."""
    clock = FakeClock()
    ctx = ControllerContext(client=client, informers=InformerFactory(client), broadcaster=EventBroadcaster(client, clock=clock), clock=clock)
    controller = ReplicaSetController(ctx, burst_replicas=2)
    rs = await client.create(REPLICASETS, replicaset("web", 4))
    controller.informer.indexer.add(rs)  # and never updated: the watch lags
    puts = []
    original = client.update_status

    async def counting(resource, body, **kw):
        puts.append(body["metadata"]["resourceVersion"])
        return await original(resource, body, **kw)

    client.update_status = counting
    try:
        for _ in range(3):
            await controller.sync("default/web")
            pods = (await client.list(PODS, "default"))["items"]
            for p in pods:  # the pod cache keeps up; the ReplicaSet cache does not
                if f"default/{p['metadata']['name']}" not in controller.pod_informer.indexer:
                    controller.pod_informer.indexer.add(p)
                    controller._add_pod(p)
    finally:
        client.update_status = original
    assert len(pods) == 4
    assert len(puts) == len(set(puts)) == 3, puts  # one PUT a sync, each from the version the last one returned
    status = (await client.get(REPLICASETS, "default", "web"))["status"]
    assert status["replicas"] == 4


async def test_a_scale_writes_observed_generation_with_the_counts_it_brings(client):
    """Upstream writes observedGeneration alone right after the create, then the
    count once the pod is seen; here the two go in one status write."""
    clock = FakeClock()
    ctx = ControllerContext(client=client, informers=InformerFactory(client), broadcaster=EventBroadcaster(client, clock=clock), clock=clock)
    controller = ReplicaSetController(ctx)

    async def observe_all() -> None:
        controller.informer.indexer.update(await client.get(REPLICASETS, "default", "web"))
        for p in (await client.list(PODS, "default"))["items"]:
            if f"default/{p['metadata']['name']}" not in controller.pod_informer.indexer:
                controller.pod_informer.indexer.add(p)
                controller._add_pod(p)

    controller.informer.indexer.add(await client.create(REPLICASETS, replicaset("web", 1)))
    await controller.sync("default/web")
    await observe_all()
    await controller.sync("default/web")
    await observe_all()
    before = await client.get(REPLICASETS, "default", "web")
    assert before["status"] == {"replicas": 1, "fullyLabeledReplicas": 1, "observedGeneration": 1}

    await client.patch(REPLICASETS, "default", "web", {"spec": {"replicas": 2}})
    controller.informer.indexer.update(await client.get(REPLICASETS, "default", "web"))
    await controller.sync("default/web")  # creates the second pod; the counts have not moved yet
    after_create = await client.get(REPLICASETS, "default", "web")
    assert len((await client.list(PODS, "default"))["items"]) == 2
    assert after_create["status"] == before["status"]  # nothing written: the pod's event brings the next sync
    await observe_all()
    await controller.sync("default/web")
    final = await client.get(REPLICASETS, "default", "web")
    assert final["status"] == {"replicas": 2, "fullyLabeledReplicas": 2, "observedGeneration": 2}
    assert int(final["metadata"]["resourceVersion"]) > int(after_create["metadata"]["resourceVersion"])


async def test_mid_way_through_a_scale_up_the_status_is_written_while_the_creates_run(client):
    """A burst with more to come writes its status during its creates, not
    after them: here the creates wait for that status PUT, so writing it after
    them would never finish. The last burst writes nothing during its creates
    (its status waits for its pods' events, as before)."""
    clock = FakeClock()
    ctx = ControllerContext(client=client, informers=InformerFactory(client), broadcaster=EventBroadcaster(client, clock=clock), clock=clock)
    controller = ReplicaSetController(ctx, burst_replicas=2)
    rs = await client.create(REPLICASETS, replicaset("web", 3))
    controller.informer.indexer.add(rs)
    status_put = asyncio.Event()
    order: list[str] = []
    original_create, original_update_status = client.create, client.update_status

    async def create(resource, body, **kw):
        if resource is PODS:
            await status_put.wait()
            order.append("create")
        return await original_create(resource, body, **kw)

    async def update_status(resource, body, **kw):
        order.append("status")
        written = await original_update_status(resource, body, **kw)
        status_put.set()
        return written

    client.create, client.update_status = create, update_status
    try:
        assert await asyncio.wait_for(controller.sync("default/web"), 30) is None
        assert order == ["status", "create", "create"]
        assert (await client.get(REPLICASETS, "default", "web"))["status"]["observedGeneration"] == 1
        for p in (await client.list(PODS, "default"))["items"]:
            controller.pod_informer.indexer.add(p)
            controller._add_pod(p)
        order.clear()
        status_put.clear()
        last = asyncio.ensure_future(controller.sync("default/web"))  # the last pod: nothing more to come
        for _ in range(100):
            await asyncio.sleep(0)
        assert order == [] and not last.done()  # its create waits, and no status PUT came to release it
        status_put.set()
        await asyncio.wait_for(last, 30)
        assert order == ["create", "status"]  # the two pods seen at its start counted after its create
        assert (await client.get(REPLICASETS, "default", "web"))["status"]["replicas"] == 2
    finally:
        client.create, client.update_status = original_create, original_update_status
    assert len((await client.list(PODS, "default"))["items"]) == 3
