"""The runtime's health as the node's Ready condition sees it (containerd's NetworkReady before and after the pod
CIDR), and where it keeps its images, as the eviction manager's imagefs signals read it.

A containerd configured as ``k8py up`` configures it (a CNI ``conf_template``, no network until the
kubelet passes the node's pod CIDR with ``UpdateRuntimeConfig``) reports NetworkReady false, in
upstream's words, until then; a runtime that stops answering is down. Needs root (containerd).
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import tempfile
from typing import Iterator

import pytest

from k8py.kubelet.eviction.signals import observe
from k8py.kubelet.node_status import HostReadings, node_conditions
from k8py.kubelet.runtime.cri import runtime as cri_runtime
from k8py.kubelet.runtime.cri.client import CRIClient
from k8py.kubelet.runtime.cri.runtime import CRIRuntime
from k8py.kubelet.runtime.protocols import HealthRuntime, ImageFilesystemRuntime
from tests.support.containerd import Containerd, containerd_missing

pytestmark = pytest.mark.timeout(300)

CONTAINERD_MISSING = "containerd tests need root, Debian's containerd and containernetworking-plugins"


@pytest.fixture(scope="module")
def templated() -> Iterator[Containerd]:
    why = containerd_missing()
    if why:
        pytest.skip(f"{CONTAINERD_MISSING}: {why}")
    workdir = tempfile.mkdtemp(prefix="k8crih-", dir="/tmp")  # short: the socket path
    ctrd = Containerd(workdir, cni_template=True)
    try:
        with ctrd:
            yield ctrd
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


async def test_network_not_ready_until_the_pod_cidr_is_given(templated: Containerd) -> None:
    runtime = await CRIRuntime(CRIClient(templated.endpoint), cgroup_root=templated.cgroup_parent).connect()
    try:
        assert isinstance(runtime, HealthRuntime)
        [error] = await runtime.health_errors()
        assert error.startswith("container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady"), error
        await runtime.update_runtime_config(pod_cidr=f"10.{random.randrange(200, 250)}.{random.randrange(0, 255)}.0/24")
        async with asyncio.timeout(60):  # containerd loads the CNI config it wrote from the template a moment later
            while await runtime.health_errors():
                await asyncio.sleep(0.1)
    finally:
        await runtime.close()


async def test_a_runtime_that_does_not_answer_is_down_after_the_threshold(tmp_path) -> None:
    clock = [1000.0]
    runtime = CRIRuntime(CRIClient(f"unix://{tmp_path}/gone.sock"), clock=lambda: clock[0])  # no runtime there
    try:
        assert await runtime.health_errors() == [], "down only after the threshold"
        clock[0] += cri_runtime.RUNTIME_DOWN_AFTER
        assert await runtime.health_errors() == ["container runtime is down"]
    finally:
        await runtime.close()


def test_the_ready_condition_carries_the_runtimes_errors() -> None:
    host = HostReadings(cpus=2, memory_bytes=8 << 30, memory_available=4 << 30, disk_bytes=100 << 30, disk_available=50 << 30,
                        pids_used=100, pid_max=4194304, kernel="6", os_image="Debian", boot_id="b", machine_id="m")
    ready = {c["type"]: c for c in node_conditions(host, set())}["Ready"]
    assert (ready["status"], ready["reason"]) == ("True", "KubeletReady")
    one = {c["type"]: c for c in node_conditions(host, set(), ["container runtime is down"])}["Ready"]
    assert (one["status"], one["reason"], one["message"]) == ("False", "KubeletNotReady", "container runtime is down")
    two = {c["type"]: c for c in node_conditions(host, set(), ["a", "b"])}["Ready"]
    assert two["message"] == "[a, b]"


async def test_the_runtime_says_where_its_images_are_for_the_imagefs_signals(templated: Containerd, tmp_path) -> None:
    runtime = await CRIRuntime(CRIClient(templated.endpoint), cgroup_root=templated.cgroup_parent).connect()
    try:
        assert isinstance(runtime, ImageFilesystemRuntime)
        # containerd's snapshotter directory below its own root, not the kubelet's image store
        assert runtime.image_fs_path.startswith(templated.layout.home + "/") and os.path.isdir(runtime.image_fs_path)
        signals = observe(str(tmp_path), runtime.image_fs_path)
        assert signals["imagefs.available"].capacity == os.statvfs(runtime.image_fs_path).f_blocks * os.statvfs(
            runtime.image_fs_path).f_frsize
    finally:
        await runtime.close()
