"""The eviction manager's decisions, with numbers for observations and a fake clock.

(The e2e test in tests/kubelet/test_eviction_e2e.py drives the same manager with the real
host's readings; here the observation source is a callable returning chosen values, which
is the manager's own seam, so every rule is pinned down exactly.)
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from k8py.kubelet.eviction.manager import EvictionManager
from k8py.kubelet.eviction.ranking import PodUsage, eviction_message, format_quantity, rank
from k8py.kubelet.eviction.signals import Observation
from k8py.kubelet.eviction.thresholds import configured_thresholds, flag_map, parse_thresholds

Mi = 1024 * 1024


def _pod(name: str, *, requests: dict[str, str] | None = None, limits: dict[str, str] | None = None, priority: int = 0,
         grace: int | None = None) -> dict[str, Any]:
    res = {k: v for k, v in (("requests", requests), ("limits", limits)) if v}
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox", "resources": res}], "priority": priority}
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "spec": spec}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _manager(thresholds, obs: dict[str, Observation], pods, usage, clock, **kw):
    evicted: list[tuple[str, str, float]] = []

    async def measure(_pods):
        return usage

    async def evict(pod, message, grace):
        evicted.append((pod["metadata"]["name"], message, grace))
        pods.remove(pod)

    mgr = EvictionManager(thresholds, observe=lambda: obs, pods=lambda: list(pods), usage=measure, evict=evict, clock=clock, **kw)
    return mgr, evicted


def test_flags_parse_into_thresholds_and_bad_ones_say_what_to_write() -> None:
    hard = flag_map("memory.available<1Gi,nodefs.available<10%", "<", "--eviction-hard")
    ts = configured_thresholds(hard, {"pid.available": "100"}, {"pid.available": 30.0})
    assert [(t.signal, t.quantity, t.percentage, t.hard, t.grace_period) for t in ts] == [
        ("memory.available", 1024**3, None, True, 0.0), ("nodefs.available", None, 0.1, True, 0.0), ("pid.available", 100, None, False, 30.0)]
    assert {t.signal for t in configured_thresholds(None, {}, {})} == {"memory.available", "nodefs.available", "nodefs.inodesFree",
                                                                         "imagefs.available"}
    with pytest.raises(ValueError, match="unknown eviction signal 'memory.free'"):
        flag_map("memory.free<1Gi", "<", "--eviction-hard")
    with pytest.raises(ValueError, match="has no grace period: add --eviction-soft-grace-period=memory.available=1m30s"):
        parse_thresholds({"memory.available": "1Gi"}, hard=False)
    with pytest.raises(ValueError, match="not signal<value"):
        flag_map("memory.available=1Gi", "<", "--eviction-hard")


def test_quantities_print_as_kubernetes_prints_them() -> None:
    assert [format_quantity(n) for n in (0, 100 * Mi, 51200 * 1024, 1023, 3 * 1024**3)] == ["0", "100Mi", "50Mi", "1023", "3Gi"]
    assert format_quantity(51201 * 1024) == "51201Ki"


def test_memory_ranking_puts_pods_over_their_requests_first_then_priority_then_usage() -> None:
    pods = [_pod("guaranteed", requests={"memory": "100Mi"}, limits={"memory": "100Mi"}), _pod("besteffort"),
            _pod("hog", requests={"memory": "1Mi"}), _pod("important", requests={"memory": "1Mi"}, priority=1000),
            _pod("critical", priority=2_000_000_000)]
    usage = {"uid-guaranteed": PodUsage(memory={"c": 50 * Mi}), "uid-besteffort": PodUsage(memory={"c": 2 * Mi}),
             "uid-hog": PodUsage(memory={"c": 80 * Mi}), "uid-important": PodUsage(memory={"c": 90 * Mi}),
             "uid-critical": PodUsage(memory={"c": 500 * Mi})}
    assert [p["metadata"]["name"] for p in rank(pods, usage, "memory")] == ["hog", "besteffort", "important", "guaranteed"]
    pid_usage = {p["metadata"]["uid"]: PodUsage(processes=n) for p, n in zip(pods, (5, 1, 9, 50, 99))}
    assert [p["metadata"]["name"] for p in rank(pods, pid_usage, "pids")] == ["hog", "guaranteed", "besteffort", "important"]


def test_the_message_is_upstreams() -> None:
    pod = _pod("hog", requests={"memory": "1Mi"})
    msg = eviction_message("memory", pod, PodUsage(memory={"c": 80 * Mi}), quantity=100 * Mi, available=51200 * 1024)
    assert msg == ("The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. "
                   "Container c was using 80Mi, request is 1Mi, has larger consumption of memory. ")
    assert eviction_message("pids", pod, PodUsage(processes=3), quantity=10, available=4) == \
        "The node was low on resource: pids. Threshold quantity: 10, available: 4. "


def test_a_hard_threshold_evicts_one_pod_at_once_and_the_condition_outlives_it_for_the_transition_period() -> None:
    clock = Clock()
    obs = {"memory.available": Observation(50 * Mi, 1024 * Mi)}
    pods = [_pod("a"), _pod("b", requests={"memory": "1Mi"}, priority=10)]
    usage = {"uid-a": PodUsage(memory={"c": 10 * Mi}), "uid-b": PodUsage(memory={"c": 10 * Mi})}
    events: list[tuple[str, str, str]] = []
    mgr, evicted = _manager(configured_thresholds({"memory.available": "100Mi"}, {}, {}), obs, pods, usage, clock,
                            pressure_transition_period=60, node_event=lambda *e: events.append(e))
    assert mgr.conditions() == set()
    asyncio.run(mgr.synchronize())
    assert [(n, g) for n, _, g in evicted] == [("a", 0.0)]  # one pod per pass, grace 0 for a hard threshold
    assert evicted[0][1].startswith("The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. ")
    assert mgr.conditions() == {"MemoryPressure"} and events == [("Warning", "EvictionThresholdMet", "Attempting to reclaim memory")]
    obs["memory.available"] = Observation(500 * Mi, 1024 * Mi)  # relieved
    clock.now += 30
    asyncio.run(mgr.synchronize())
    assert len(evicted) == 1 and mgr.conditions() == {"MemoryPressure"}  # still within the transition period
    clock.now += 31
    assert mgr.conditions() == set()


def test_a_soft_threshold_waits_for_its_grace_period_and_caps_the_pods_grace() -> None:
    clock = Clock()
    obs = {"nodefs.available": Observation(5 * Mi, 100 * Mi)}
    pods = [_pod("a", grace=30)]
    mgr, evicted = _manager(configured_thresholds({}, {"nodefs.available": "10%"}, {"nodefs.available": 20.0}), obs, pods,
                            {"uid-a": PodUsage(disk={"c": Mi})}, clock, max_pod_grace_period=5)
    asyncio.run(mgr.synchronize())
    assert evicted == [] and mgr.conditions() == {"DiskPressure"}  # the condition at once, the eviction after the grace period
    clock.now += 19
    asyncio.run(mgr.synchronize())
    assert evicted == []
    clock.now += 2
    asyncio.run(mgr.synchronize())
    assert [(n, g) for n, _, g in evicted] == [("a", 5.0)]
    assert evicted[0][1].startswith("The node was low on resource: ephemeral-storage. Threshold quantity: 10Mi, available: 5Mi. ")


def test_admission_under_pressure_is_upstreams() -> None:
    clock = Clock()
    obs = {"memory.available": Observation(0, 1024 * Mi), "pid.available": Observation(10**6, 10**6)}
    mgr, _ = _manager(configured_thresholds({"memory.available": "100Mi", "pid.available": "10"}, {}, {}), obs, [], {}, clock)
    asyncio.run(mgr.synchronize())
    assert mgr.admit(_pod("be")) == "The node had condition: [MemoryPressure]. "
    assert mgr.admit(_pod("burstable", requests={"memory": "1Mi"})) is None
    tolerant = _pod("tolerant")
    tolerant["spec"]["tolerations"] = [{"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"}]
    assert mgr.admit(tolerant) is None
    obs["pid.available"] = Observation(1, 10**6)
    asyncio.run(mgr.synchronize())
    assert mgr.admit(_pod("burstable", requests={"memory": "1Mi"})) == "The node had condition: [MemoryPressure PIDPressure]. "


def test_minimum_reclaim_keeps_a_met_threshold_until_that_much_more_is_free() -> None:
    clock = Clock()
    obs = {"memory.available": Observation(90 * Mi, 1024 * Mi)}
    pods = [_pod("a"), _pod("b")]
    usage = {"uid-a": PodUsage(memory={"c": 20 * Mi}), "uid-b": PodUsage(memory={"c": 10 * Mi})}
    ts = configured_thresholds({"memory.available": "100Mi"}, {}, {}, {"memory.available": "50Mi"})
    assert ts[0].min_reclaim == 50 * Mi
    mgr, evicted = _manager(ts, obs, pods, usage, clock)
    asyncio.run(mgr.synchronize())
    assert [n for n, _, _ in evicted] == ["a"]
    obs["memory.available"] = Observation(120 * Mi, 1024 * Mi)  # above the threshold, not above threshold + reclaim
    asyncio.run(mgr.synchronize())
    assert [n for n, _, _ in evicted] == ["a", "b"]
    obs["memory.available"] = Observation(120 * Mi, 1024 * Mi)
    mgr2, evicted2 = _manager(ts, obs, [_pod("c")], {}, clock)  # never met before: 120Mi is fine
    asyncio.run(mgr2.synchronize())
    assert evicted2 == []


def test_disk_pressure_deletes_unused_images_first_and_evicts_only_if_that_was_not_enough() -> None:
    clock = Clock()
    obs = {"imagefs.available": Observation(5 * Mi, 100 * Mi)}
    reclaims: list[int] = []

    async def reclaim() -> int:
        reclaims.append(1)
        obs["imagefs.available"] = Observation(50 * Mi, 100 * Mi) if len(reclaims) == 1 else obs["imagefs.available"]
        return 1

    pods = [_pod("a")]
    mgr, evicted = _manager(configured_thresholds({"imagefs.available": "15%"}, {}, {}), obs, pods, {}, clock, reclaim_disk=reclaim)
    asyncio.run(mgr.synchronize())
    assert reclaims == [1] and evicted == [] and mgr.conditions() == {"DiskPressure"}  # relieved by the reclaim
    obs["imagefs.available"] = Observation(5 * Mi, 100 * Mi)
    asyncio.run(mgr.synchronize())  # the reclaim frees nothing more: a pod goes
    assert len(reclaims) == 2 and [n for n, _, _ in evicted] == ["a"]


def test_unused_images_are_removed_and_used_ones_kept() -> None:
    # a stand-in for the runtime's image service (only the three calls the reclaim makes; the
    # process runtime's real one needs a registry, which tests/images exercise)
    from k8py.kubelet.eviction.node_reclaim import delete_unused_images
    from k8py.kubelet.runtime.protocols import ContainerState, ContainerStatus, Image

    class Images:
        def __init__(self) -> None:
            self.images = [Image("sha256:a", ["reg/a:1"]), Image("sha256:b", ["reg/b:1"]), Image("sha256:c", [], ["reg/c@sha256:c"])]

        async def list_containers(self, sandbox_id=None):
            return [ContainerStatus("x", "s", "c", 0, ContainerState.EXITED, "reg/b:1", "sha256:b")]

        async def list_images(self):
            return list(self.images)

        async def remove_image(self, spec):
            self.images = [i for i in self.images if spec.image not in (i.id, *i.repo_tags)]

    rt = Images()
    assert asyncio.run(delete_unused_images(rt)) == 2  # type: ignore[arg-type]
    assert [i.id for i in rt.images] == ["sha256:b"]
