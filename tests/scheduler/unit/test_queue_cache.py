"""The scheduling queue (on a fake clock) and the cache."""

from __future__ import annotations

from k8py.client.clock import FakeClock
from k8py.scheduler.cache import SchedulerCache
from k8py.scheduler.cache.aggregate import NodeAggregate
from k8py.scheduler.framework.interfaces import ClusterEventHint
from k8py.scheduler.framework.status import unresolvable
from k8py.scheduler.framework.types import PodInfo, QueuedPodInfo
from k8py.scheduler.plugins.priority_sort import less
from k8py.scheduler.queue import ACTIVE, BACKOFF, GATED, UNSCHEDULABLE, SchedulingQueue
from k8py.scheduler.queue.backoff_queue import BackoffQueue
from tests.scheduler.conftest import node as node_obj
from tests.scheduler.conftest import pod as pod_obj


def _queue(**kw):
    clock = FakeClock()
    return SchedulingQueue(less=less, clock=clock, **kw), clock


def test_active_queue_orders_by_priority_then_arrival():
    q, clock = _queue()
    q.add(pod_obj("low", priority=1))
    clock.advance(1)
    q.add(pod_obj("high", priority=10))
    clock.advance(1)
    q.add(pod_obj("low2", priority=1))
    assert [q.pop_nowait().info.name for _ in range(3)] == ["high", "low", "low2"]
    assert q.pop_nowait() is None


def test_a_sort_key_orders_the_active_queue_as_its_less_does():
    from k8py.scheduler.plugins.priority_sort import PrioritySort

    orders = []
    for kw in ({}, {"sort_key": PrioritySort.sort_key}):
        q, clock = _queue(**kw)
        for i, priority in enumerate([1, 5, 1, 5, 3, 1, 5]):
            q.add(pod_obj(f"p{i}", priority=priority))
            if i % 2:
                clock.advance(1)  # pairs share a timestamp: they keep arrival order
        orders.append([q.pop_nowait().info.name for _ in range(7)])
    assert orders[0] == orders[1] == ["p1", "p3", "p6", "p4", "p0", "p2", "p5"]


def test_backoff_doubles_from_one_second_to_ten():
    q, clock = _queue()
    q.add(pod_obj("p"))
    qpi = q.pop_nowait()
    durations = []
    for attempts in range(1, 7):
        qpi.attempts = attempts
        durations.append(q.backoff_duration(qpi))
    assert durations == [1, 2, 4, 8, 10, 10]


def test_failed_pod_waits_out_its_backoff():
    q, clock = _queue()
    q.add(pod_obj("p"))
    qpi = q.pop_nowait()
    assert q.add_unschedulable(qpi, backoff_only=True) == BACKOFF
    assert q.flush_backoff() == 0
    clock.advance(1.01)
    assert q.flush_backoff() == 1 and q.where("default/p") == ACTIVE


def test_unschedulable_pods_move_only_on_events_their_plugins_registered():
    hints = {"NodeResourcesFit": [ClusterEventHint("Node", frozenset({"Add"}), lambda pod, old, new: new.get("fits"))]}
    q, clock = _queue(hints=hints)
    q.add(pod_obj("p"))
    qpi = q.pop_nowait()
    qpi.unschedulable_plugins = {"NodeResourcesFit"}
    assert q.add_unschedulable(qpi) == UNSCHEDULABLE
    assert q.move_on_event("Pod", ("Add",)) == 0  # not registered
    assert q.move_on_event("Node", ("Add",), None, {"fits": False}) == 0  # the hint says it cannot help
    clock.advance(5)
    assert q.move_on_event("Node", ("Add",), None, {"fits": True}) == 1
    assert q.where("default/p") == ACTIVE


def test_an_event_during_the_cycle_sends_the_pod_to_backoff():
    q, clock = _queue()
    q.add(pod_obj("p"))
    qpi = q.pop_nowait()
    q.move_on_event("Node", ("Add",))  # arrives while the pod is being scheduled
    qpi.unschedulable_plugins = {"NodeResourcesFit"}
    assert q.add_unschedulable(qpi) == BACKOFF


def test_leftover_unschedulable_pods_are_flushed_after_five_minutes():
    q, clock = _queue()
    q.add(pod_obj("p"))
    qpi = q.pop_nowait()
    qpi.unschedulable_plugins = {"X"}
    q.add_unschedulable(qpi)
    clock.advance(299)
    assert q.flush_unschedulable_leftover() == 0
    clock.advance(2)
    assert q.flush_unschedulable_leftover() == 1


def test_gated_pods_wait_for_pre_enqueue_to_pass():
    def gate(pod):
        return unresolvable("gated") if pod.spec.get("schedulingGates") else None
    q, clock = _queue(pre_enqueue=gate)
    assert q.add(pod_obj("g", schedulingGates=[{"name": "x"}])) == GATED
    assert q.pop_nowait() is None
    assert q.update(pod_obj("g")) == ACTIVE
    assert q.pop_nowait().info.name == "g"


def test_cache_assume_confirm_forget_and_expire():
    cache = SchedulerCache(assumed_ttl=30)
    cache.add_node(node_obj("n", cpu="2"))
    from k8py.scheduler.framework.types import PodInfo
    p = PodInfo({**pod_obj("p", cpu="1"), "metadata": {"name": "p", "namespace": "default", "uid": "u"}})
    cache.assume_pod(p.with_node("n"))
    assert cache.node("n").requested.milli_cpu == 1000 and cache.is_assumed("default/p")
    cache.forget_pod("default/p")
    assert cache.node("n").requested.milli_cpu == 0
    cache.assume_pod(p.with_node("n"))
    cache.finish_binding("default/p", now=100)
    assert cache.cleanup_expired(now=129) == []
    assert cache.cleanup_expired(now=131) == ["default/p"]
    assert cache.node("n").requested.milli_cpu == 0
    cache.assume_pod(p.with_node("n"))
    bound = {**pod_obj("p", cpu="1", nodeName="n")}
    cache.add_pod(bound)  # the informer confirms it
    assert not cache.is_assumed("default/p") and cache.node("n").requested.milli_cpu == 1000


def test_a_confirmed_or_removed_assumption_never_expires():
    cache = SchedulerCache(assumed_ttl=30)
    cache.add_node(node_obj("n", cpu="4"))
    from k8py.scheduler.framework.types import PodInfo
    for name in ("confirmed", "removed", "expiring"):
        info = PodInfo({**pod_obj(name, cpu="1"), "metadata": {"name": name, "namespace": "default", "uid": name}})
        cache.assume_pod(info.with_node("n"))
        cache.finish_binding(f"default/{name}", now=100)
    cache.add_pod(pod_obj("confirmed", cpu="1", nodeName="n"))
    cache.remove_pod("default/removed")
    assert cache.cleanup_expired(now=131) == ["default/expiring"]
    assert cache.pod("default/confirmed") is not None and cache.node("n").requested.milli_cpu == 1000
    assert cache.cleanup_expired(now=1000) == []


def test_a_deleted_node_with_pods_is_kept_unlisted():
    cache = SchedulerCache()
    cache.add_node(node_obj("n"))
    cache.add_pod(pod_obj("p", nodeName="n"))
    cache.remove_node("n")
    assert cache.nodes == [] and cache.node("n") is None
    assert cache.dump() == {"n": ["default/p"]}
    cache.remove_pod("default/p")
    assert cache.dump() == {}


def test_aggregate_follows_only_the_nodes_that_changed():
    cache = SchedulerCache()
    for i in range(3):
        cache.add_node(node_obj(f"n{i}", labels={"zone": "z1" if i < 2 else "z2"}))
    calls = []

    def contribution(info):
        calls.append(info.name)
        return [("pods", info.labels.get("zone", ""), len(info.pods))] if info.pods else []
    agg = NodeAggregate(contribution)
    assert agg.refresh(cache) == {}
    assert len(calls) == 3
    calls.clear()
    cache.add_pod(pod_obj("p", nodeName="n2"))
    assert agg.refresh(cache) == {"pods": {"z2": 1}}
    assert calls == ["n2"]
    cache.remove_node("n2")
    cache.remove_pod("default/p")
    assert agg.refresh(cache) == {}


def _bound(pending: dict, node: str, rv: str) -> dict:
    """The pod as the informer sees it once bound: nodeName, a new resourceVersion, PodScheduled."""
    return {**pending, "metadata": {**pending["metadata"], "resourceVersion": rv},
            "spec": {**pending["spec"], "nodeName": node},
            "status": {"conditions": [{"type": "PodScheduled", "status": "True"}]}}


def test_the_bound_pod_confirms_its_assumption_without_touching_the_node():
    from k8py.scheduler.framework.types import PodInfo
    cache = SchedulerCache()
    cache.add_node(node_obj("n", cpu="2"))
    pending = {**pod_obj("p", cpu="1", labels={"app": "a"}), "metadata": {"name": "p", "namespace": "default", "uid": "u",
                                                                         "resourceVersion": "5", "labels": {"app": "a"}}}
    assumed = PodInfo(pending).with_node("n")
    cache.assume_pod(assumed)
    generation = cache.node("n").generation
    confirmed = cache.add_pod(_bound(pending, "n", "6"))
    assert not cache.is_assumed("default/p")
    assert cache.node("n").generation == generation, "nothing the node's sums or plugins read changed"
    assert cache.node("n").pods["default/p"] is confirmed and confirmed.pod["metadata"]["resourceVersion"] == "6"
    assert confirmed.requests.milli_cpu == 1000 and cache.node("n").requested.milli_cpu == 1000
    # a status-only update of the placed pod is the same
    cache.update_pod({**confirmed.pod, "metadata": {**confirmed.pod["metadata"], "resourceVersion": "7"},
                      "status": {"phase": "Running"}})
    assert cache.node("n").generation == generation and cache.node("n").requested.milli_cpu == 1000


def test_a_placed_pod_whose_labels_spec_or_node_change_is_placed_again():
    from k8py.scheduler.framework.types import PodInfo
    cache = SchedulerCache()
    cache.add_node(node_obj("n", cpu="4"))
    cache.add_node(node_obj("m", cpu="4"))
    pending = {**pod_obj("p", cpu="1"), "metadata": {"name": "p", "namespace": "default", "uid": "u"}}
    cache.assume_pod(PodInfo(pending).with_node("n"))
    generation = cache.node("n").generation
    relabelled = _bound(pending, "n", "6")
    relabelled["metadata"]["labels"] = {"app": "b"}
    assert cache.add_pod(relabelled).labels == {"app": "b"}
    assert cache.node("n").generation > generation
    moved = _bound(pending, "m", "7")
    cache.add_pod(moved)
    assert cache.node("n").requested.milli_cpu == 0 and cache.node("m").requested.milli_cpu == 1000
    terminating = {**moved, "metadata": {**moved["metadata"], "deletionTimestamp": "2026-12-01T00:00:00Z"}}
    generation = cache.node("m").generation
    cache.update_pod(terminating)
    assert cache.node("m").generation > generation, "topology spread skips terminating pods: the node changed"


async def test_a_pod_moved_by_an_event_leaves_backoff_when_its_backoff_ends_not_at_the_next_tick():
    """A pod rejected at t=0.5 and moved by an event at t=0.8 leaves backoff at t=1.5, when
    its one second ends: the queue's timer wakes for it, where whole-second ticks (at 1.0,
    2.0) would have held it until t=2.0."""
    import asyncio

    hints = {"TaintToleration": [ClusterEventHint("Node", frozenset({"Update"}), None)]}
    q, clock = _queue(hints=hints)
    runner = asyncio.create_task(q.run(), name="queue-under-test")
    try:
        await clock.step(0.5)  # the queue's timer is half way through a one-second sleep
        q.add(pod_obj("p"))
        qpi = q.pop_nowait()
        qpi.unschedulable_plugins = {"TaintToleration"}
        assert q.add_unschedulable(qpi) == UNSCHEDULABLE
        await clock.step(0.3)
        assert q.move_on_event("Node", ("Update",)) == 1 and q.where("default/p") == BACKOFF
        await clock.step(0.69)
        assert q.where("default/p") == BACKOFF
        await clock.step(0.02)  # t=1.51
        assert q.where("default/p") == ACTIVE
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)


def test_with_the_active_queue_empty_a_backoff_pod_is_popped_before_its_backoff_ends():
    """KEP-5142 (SchedulerPopFromBackoffQ): a pod moved to backoff after being
    unschedulable is tried at once when nothing else waits; one backing off after
    an error waits its backoff out; anything active goes first."""
    hints = {"TaintToleration": [ClusterEventHint("Node", frozenset({"Update"}), None)]}
    q, clock = _queue(hints=hints)
    q.add(pod_obj("tainted"))
    qpi = q.pop_nowait()
    qpi.unschedulable_plugins = {"TaintToleration"}
    assert q.add_unschedulable(qpi) == UNSCHEDULABLE
    assert q.pop_nowait() is None  # unschedulable pods wait for an event
    q.add(pod_obj("failed"))
    failed = q.pop_nowait()
    assert q.add_unschedulable(failed, backoff_only=True) == BACKOFF  # an error
    assert q.move_on_event("Node", ("Update",)) == 1 and q.where("default/tainted") == BACKOFF
    q.add(pod_obj("new"))
    assert q.pop_nowait().info.name == "new"  # the active queue first
    again = q.pop_nowait()
    assert again is not None and again.info.name == "tainted" and again.attempts == 2
    assert q.where("default/tainted") == "in-flight"
    assert q.pop_nowait() is None  # the error backoff is not cut short
    clock.advance(1.01)
    assert q.flush_backoff() == 1 and q.pop_nowait().info.name == "failed"
    assert not q._backoff.can_pop_early()  # nothing left behind for the flushed or popped pods


def test_the_backoff_queue_skips_entries_of_pods_gone_or_pushed_again():
    bq = BackoffQueue()
    a, b, c = (QueuedPodInfo(PodInfo(pod_obj(n)), 0.0) for n in "abc")
    assert bq.push(a, 5.0) and not bq.push(b, 7.0)  # a ends first
    assert bq.push(c, 1.0, error=True)  # an error backoff: never popped early
    assert bq.next_expiry() == 1.0
    assert bq.pop_earliest() is a and "default/a" not in bq
    assert not bq.push(b, 9.0)  # pushed again: its 7.0 entries are stale
    assert bq.discard("default/c") is c and bq.discard("default/c") is None
    assert bq.pop_expired(8.0) == []  # a popped, b moved to 9.0, c discarded
    assert bq.pop_expired(9.0) == [b] and len(bq) == 0
    assert not bq.can_pop_early() and bq.pop_earliest() is None


def test_popping_from_backoff_can_be_switched_off_and_runs_pre_enqueue():
    q, clock = _queue(pop_from_backoff=False)
    q.add(pod_obj("p"))
    qpi = q.pop_nowait()
    q.move_on_event("Node", ("Add",))
    qpi.unschedulable_plugins = {"NodeResourcesFit"}
    assert q.add_unschedulable(qpi) == BACKOFF
    assert q.pop_nowait() is None  # upstream before 1.33: the backoff is waited out

    gates = {"on": False}
    q, clock = _queue(pre_enqueue=lambda pod: unresolvable("gated") if gates["on"] else None)
    q.add(pod_obj("g"))
    qpi = q.pop_nowait()
    q.move_on_event("Node", ("Add",))
    qpi.unschedulable_plugins = {"NodeResourcesFit"}
    assert q.add_unschedulable(qpi) == BACKOFF
    gates["on"] = True
    assert q.pop_nowait() is None and q.where("default/g") == GATED


async def test_pop_wakes_when_a_pod_enters_backoff():
    import asyncio

    q, clock = _queue()
    q.add(pod_obj("p"))
    qpi = q.pop_nowait()
    waiter = asyncio.create_task(q.pop(), name="pop-under-test")
    await asyncio.sleep(0)
    assert not waiter.done()
    q.move_on_event("Node", ("Add",))
    qpi.unschedulable_plugins = {"NodeResourcesFit"}
    assert q.add_unschedulable(qpi) == BACKOFF
    popped = await asyncio.wait_for(waiter, 30)
    assert popped.info.name == "p"
