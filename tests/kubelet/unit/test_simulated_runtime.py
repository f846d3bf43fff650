"""The simulated runtime keeps the protocols' promises without processes."""

from __future__ import annotations

import asyncio

from k8py.kubelet.runtime.protocols import ContainerConfig, ContainerEventType, ContainerState, PodSandboxConfig, Runtime, SandboxState
from k8py.kubelet.runtime.simulated import SimulatedRuntime, SimulationDefaults


async def test_containers_run_for_the_annotated_time_and_exit_with_the_annotated_code() -> None:
    rt = SimulatedRuntime(SimulationDefaults(run_seconds=None))
    assert isinstance(rt, Runtime)
    await rt.update_runtime_config(pod_cidr="10.1.2.0/24")
    sb = PodSandboxConfig("p", "ns", "uid-1", annotations={"k8py.io/simulated-run-seconds.job": "0.05", "k8py.io/simulated-exit-code": "3"})
    sid = await rt.run_pod_sandbox(sb)
    assert (await rt.pod_sandbox_status(sid)).ip == "10.1.2.2"
    job = await rt.create_container(sid, ContainerConfig("job", "busybox"), sb)
    svc = await rt.create_container(sid, ContainerConfig("svc", "busybox"), sb)
    await rt.start_container(job)
    await rt.start_container(svc)
    events = rt.container_events()
    seen = [await asyncio.wait_for(events.__anext__(), 5) for _ in range(5)]
    assert [e.type for e in seen][-1] is ContainerEventType.STOPPED and seen[-1].container_id == job and seen[-1].pod_uid == "uid-1"
    done = await rt.container_status(job)
    assert done.state is ContainerState.EXITED and done.exit_code == 3 and done.reason == "Error"
    assert (await rt.container_status(svc)).state is ContainerState.RUNNING
    await rt.stop_pod_sandbox(sid)
    assert (await rt.container_status(svc)).state is ContainerState.EXITED
    assert (await rt.pod_sandbox_status(sid)).state is SandboxState.NOTREADY
    await rt.remove_pod_sandbox(sid)
    assert await rt.list_containers() == [] and await rt.list_pod_sandboxes() == []
