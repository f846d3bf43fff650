"""Local ephemeral-storage eviction and the node's disk reclaim, decided as upstream's kubelet decides them."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from k8py.kubelet.eviction.local_storage import StorageUsage, violation
from k8py.kubelet.eviction.manager import EvictionManager
from k8py.kubelet.eviction.node_reclaim import delete_dead_containers
from k8py.kubelet.eviction.signals import Observation
from k8py.kubelet.eviction.thresholds import configured_thresholds
from k8py.kubelet.runtime.protocols import ContainerConfig, ContainerState, PodSandboxConfig
from k8py.kubelet.runtime.simulated import SimulatedRuntime, SimulationDefaults

Mi = 1024 * 1024


def _pod(*containers: dict[str, Any], volumes: list[dict[str, Any]] | None = None, name: str = "p") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {"containers": list(containers), "volumes": volumes or []}}


def _c(name: str, limit: str | None = None) -> dict[str, Any]:
    return {"name": name, "image": "busybox", "resources": {"limits": {"ephemeral-storage": limit}} if limit else {}}


def test_an_empty_dir_over_its_size_limit_is_named_first_with_upstreams_words() -> None:
    pod = _pod(_c("c", "100Mi"), volumes=[{"name": "scratch", "emptyDir": {"sizeLimit": "1Mi"}}, {"name": "free", "emptyDir": {}}])
    assert violation(pod, StorageUsage({"scratch": 2 * Mi, "free": 50 * Mi}, {"c": 0})) == \
        'Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". '
    assert violation(pod, StorageUsage({"scratch": Mi, "free": 50 * Mi}, {"c": 0})) is None  # at the limit is within it


def test_the_pod_total_counts_its_volumes_against_the_sum_of_its_containers_limits() -> None:
    pod = _pod(_c("a", "2Mi"), _c("b", "2Mi"), _c("free"), volumes=[{"name": "v", "emptyDir": {}}])
    assert violation(pod, StorageUsage({"v": 4 * Mi}, {"a": Mi // 2, "b": Mi // 2, "free": 0})) == \
        "Pod ephemeral local storage usage exceeds the total limit of containers 4Mi. "
    assert violation(pod, StorageUsage({"v": 2 * Mi}, {"a": Mi // 2, "b": Mi // 2})) is None
    # no container sets a limit: the pod has none
    assert violation(_pod(_c("a"), volumes=[{"name": "v", "emptyDir": {}}]), StorageUsage({"v": 10**12}, {"a": 10**12})) is None


def test_a_container_over_its_own_limit_is_named() -> None:
    pod = _pod(_c("small", "1Mi"), _c("big", "100Mi"))
    assert violation(pod, StorageUsage({}, {"small": 2 * Mi, "big": 0})) == \
        'Container small exceeded its local ephemeral storage limit "1Mi". '


def test_local_storage_evicts_at_once_before_any_threshold_is_looked_at() -> None:
    pods = [_pod(_c("c", "1Mi"), name="filler"), _pod(_c("c"), name="calm")]
    evicted: list[tuple[str, str, float, bool]] = []

    async def usage(_pods):
        return {}

    async def evict(pod, message, grace, disruption=True):
        evicted.append((pod["metadata"]["name"], message, grace, disruption))

    async def over():
        return [(pods[0], "Container c exceeded its local ephemeral storage limit \"1Mi\". ")]

    obs = {"memory.available": Observation(10 * Mi, 1024 * Mi)}  # a memory threshold is met too: local storage goes first
    mgr = EvictionManager(configured_thresholds({"memory.available": "100Mi"}, {}, {}), observe=lambda: obs, pods=lambda: list(pods),
                          usage=usage, evict=evict, local_storage=over)
    assert asyncio.run(mgr.synchronize())["metadata"]["name"] == "filler"
    # at once, and without the DisruptionTarget condition a node-pressure eviction adds (upstream passes none)
    assert evicted == [("filler", 'Container c exceeded its local ephemeral storage limit "1Mi". ', 0.0, False)]


async def _exited(rt: SimulatedRuntime, sid: str, sb: PodSandboxConfig, name: str, attempt: int) -> str:
    cid = await rt.create_container(sid, ContainerConfig(name, "busybox", attempt=attempt), sb)
    await rt.start_container(cid)
    await rt.stop_container(cid, 0)
    return cid


async def test_dead_containers_go_keeping_the_newest_of_each_container_of_the_pods_still_running() -> None:
    rt = SimulatedRuntime(SimulationDefaults(run_seconds=None))
    await rt.update_runtime_config(pod_cidr="10.1.2.0/24")
    live = PodSandboxConfig("live", "ns", "uid-live")
    done = PodSandboxConfig("done", "ns", "uid-done")
    live_sid, done_sid = await rt.run_pod_sandbox(live), await rt.run_pod_sandbox(done)
    old = await _exited(rt, live_sid, live, "app", 0)
    previous = await _exited(rt, live_sid, live, "app", 1)
    running = await rt.create_container(live_sid, ContainerConfig("app", "busybox", attempt=2), live)
    await rt.start_container(running)
    init = await _exited(rt, live_sid, live, "init", 0)
    finished = await _exited(rt, done_sid, done, "job", 0)

    assert await delete_dead_containers(rt, active=lambda: {"uid-live"}) == 2
    left = {c.id: c for c in await rt.list_containers()}
    assert old not in left and finished not in left
    assert {previous, init, running} == set(left) and left[running].state is ContainerState.RUNNING
    assert await delete_dead_containers(rt, active=lambda: {"uid-live"}) == 0


def test_a_dead_containers_logs_go_but_only_its_own_regular_files(tmp_path) -> None:
    """The log and its rotations are removed; a sibling with the same prefix and a log path
    that is no regular file stay (the simulated runtime's logs are /dev/null: unlinking
    that broke the whole machine)."""
    from k8py.kubelet.eviction.node_reclaim import _remove_logs

    log = tmp_path / "0.log"
    for name in ("0.log", "0.log.20261201-101010", "0.log.1", "0.logger"):
        (tmp_path / name).write_text("x")
    _remove_logs(str(log))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["0.logger"]
    device_like = tmp_path / "1.log"
    os.mkfifo(device_like)
    _remove_logs(str(device_like))
    assert device_like.exists()


def test_only_pods_with_a_storage_limit_are_measured() -> None:
    from k8py.kubelet.eviction.local_storage import has_limits

    assert not has_limits(_pod(_c("a"), volumes=[{"name": "v", "emptyDir": {}}]))
    assert has_limits(_pod(_c("a", "1Gi")))
    assert has_limits(_pod(_c("a"), volumes=[{"name": "v", "emptyDir": {"sizeLimit": "1Mi"}}]))
