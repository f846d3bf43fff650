"""CRIRuntime (the kubelet's runtime protocols on containerd): a pod's lifecycle as the kubelet's pod sync drives it."""

from __future__ import annotations

import asyncio
import os
import uuid

import pytest

from k8py.kubelet.runtime.cri.client import CRIClient
from k8py.kubelet.runtime.cri.runtime import CRIRuntime
from k8py.kubelet.runtime.protocols import (AuthConfig, ContainerConfig, ContainerEventType, ContainerState, ImageSpec,
                                            PodSandboxConfig, Resources, Runtime, RuntimeErrorStatus, SandboxState,
                                            container_log_path, pod_log_directory)
from tests.support.containerd import Containerd
from tests.support.oci_registry import Registry, busybox_layer, image

pytestmark = pytest.mark.timeout(300)


async def test_runtime_runs_a_pod_and_reports_events(containerd: Containerd, registry: Registry, tmp_path) -> None:
    ref = registry.push("k8py/rt", "1", image([busybox_layer()]))
    runtime = await CRIRuntime(CRIClient(containerd.endpoint), cgroup_root=containerd.cgroup_parent,
                               poll_interval=0.2).connect()
    assert isinstance(runtime, Runtime)
    assert runtime.info().name == "containerd" and runtime.info().version
    uid = str(uuid.uuid4())
    log_dir = pod_log_directory(str(tmp_path), "default", "web", uid)
    os.makedirs(log_dir)
    sandbox = PodSandboxConfig(name="web", namespace="default", uid=uid, log_directory=log_dir,
                               cgroup_parent=f"kubepods/besteffort/pod{uid}")
    events = runtime.container_events()
    seen: list[ContainerEventType] = []

    async def collect() -> None:
        async for ev in events:
            assert ev.pod_uid == uid
            seen.append(ev.type)

    collector = asyncio.create_task(collect(), name="collect-events")
    try:
        with pytest.raises(RuntimeErrorStatus) as err:
            await runtime.pull_image(ImageSpec(f"{registry.host}/k8py/none:1"))
        assert err.value.reason == "ErrImagePull" and "not found" in err.value.message
        image_ref = await runtime.pull_image(ImageSpec(ref))
        assert (await runtime.image_status(ImageSpec(ref))).id == image_ref

        sid = await runtime.run_pod_sandbox(sandbox)
        st = await runtime.pod_sandbox_status(sid)
        assert st.state == SandboxState.READY and st.uid == uid and st.ip
        assert sid in {s.id for s in await runtime.list_pod_sandboxes()}
        # the pod's cgroup is below the runtime's root, as the kubelet asked
        assert os.path.isdir(f"/sys/fs/cgroup/memory{containerd.cgroup_parent}/kubepods/besteffort/pod{uid}")

        cfg = ContainerConfig(name="app", image=ref, command=["/bin/sh", "-c"], args=["echo started; exec sleep 600"],
                              log_path="app/0.log", resources=Resources(memory_limit=32 << 20))
        cid = await runtime.create_container(sid, cfg, sandbox)
        await runtime.start_container(cid)
        st_c = await runtime.container_status(cid)
        assert st_c.state == ContainerState.RUNNING and st_c.sandbox_id == sid and st_c.image_ref.startswith(f"{registry.host}/k8py/rt@sha256:")  # the imageID upstream shows
        assert st_c.log_path == container_log_path(log_dir, "app", 0)
        async with asyncio.timeout(60):
            while "started" not in open(st_c.log_path).read():
                await asyncio.sleep(0.1)
        r = await runtime.exec_sync(cid, ["/bin/sh", "-c", "cat /proc/1/comm; echo oops >&2; exit 4"], 30)
        assert (r.exit_code, r.stdout, r.stderr, r.timed_out) == (4, b"sleep\n", b"oops\n", False)
        r = await runtime.exec_sync(cid, ["/bin/sleep", "30"], 1)
        assert r.timed_out, r
        async with asyncio.timeout(60):  # it runs until stopped, so a relist sees it running
            while ContainerEventType.STARTED not in seen:
                await asyncio.sleep(0.05)
        await runtime.stop_container(cid, 2)  # sh ignores nothing here: sleep gets SIGTERM and exits
        st_c = await runtime.container_status(cid)
        assert st_c.state == ContainerState.EXITED and st_c.finished_at > 0 and st_c.started_at > 0
        assert [c.id for c in await runtime.list_containers(sid)] == [cid]
        async with asyncio.timeout(60):
            while ContainerEventType.STOPPED not in seen:
                await asyncio.sleep(0.05)
        await runtime.remove_container(cid)
        await runtime.stop_pod_sandbox(sid)
        await runtime.remove_pod_sandbox(sid)
        await runtime.remove_pod_sandbox(sid)  # idempotent
        async with asyncio.timeout(60):
            while ContainerEventType.DELETED not in seen:
                await asyncio.sleep(0.05)
    finally:
        collector.cancel()
        with pytest.raises(asyncio.CancelledError):
            await collector
        await runtime.close()


async def test_pulls_try_each_credential_in_turn(containerd: Containerd, auth_registry: Registry) -> None:
    ref = auth_registry.push("k8py/private", "1", image([busybox_layer({"etc/private": "yes"})]))
    runtime = await CRIRuntime(CRIClient(containerd.endpoint), cgroup_root=containerd.cgroup_parent).connect()
    try:
        with pytest.raises(RuntimeErrorStatus) as err:
            await runtime.pull_image(ImageSpec(ref))
        assert err.value.reason == "ErrImagePull" and "401 Unauthorized" in err.value.message, err.value.message
        wrong, right = AuthConfig("alice", "nope", source="secret a"), AuthConfig("alice", "wonderland", source="secret b")
        with pytest.raises(RuntimeErrorStatus):
            await runtime.pull_image(ImageSpec(ref, auth=[wrong]))
        image_ref = await runtime.pull_image(ImageSpec(ref, auth=[wrong, right]))
        assert (await runtime.image_status(ImageSpec(ref))).id == image_ref
        await runtime.remove_image(ImageSpec(ref))
        assert await runtime.image_status(ImageSpec(ref)) is None
    finally:
        await runtime.close()
