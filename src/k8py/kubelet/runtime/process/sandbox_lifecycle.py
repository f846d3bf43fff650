"""The process runtime's pod sandboxes: the CRI sandbox calls of :class:`~.runtime.ProcessRuntime`.

A sandbox is a record (:mod:`.sandboxes`), the pod's cgroup (:mod:`.cgroups`, pod-level
limits), and either a loopback pod IP with its hostPort relays (:mod:`.host_ports`) or,
with ``--pod-network=cni``, a network namespace of its own. Stopping one stops its
running containers at once (grace 0: the kubelet has already run their grace periods);
removing one removes its containers and, once no other sandbox of the pod is left, the
pod's cgroup.

:class:`SandboxLifecycle` is a part of :class:`~.runtime.ProcessRuntime`, split out by
concern: it reads and writes the runtime state annotated below and uses the runtime's
container calls; it is not used on its own.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import TYPE_CHECKING, Any, Sequence

from k8py.kubelet.network.pod_network import CNIPodNetwork
from k8py.kubelet.runtime.process.cgroups import CgroupManager
from k8py.kubelet.runtime.process.host_ports import HostPorts, check_mappings
from k8py.kubelet.runtime.process.sandboxes import Sandboxes
from k8py.kubelet.runtime.protocols import ContainerState, PodSandboxConfig, PodSandboxStatus, RuntimeErrorStatus

__all__ = ["SandboxLifecycle"]


class SandboxLifecycle:
    # the runtime's state this part uses (set by ProcessRuntime.__init__)
    cgroups: CgroupManager
    sandboxes: Sandboxes
    network: CNIPodNetwork | None
    host_ports: HostPorts
    _containers: dict[str, dict[str, Any]]

    if TYPE_CHECKING:  # ProcessRuntime's own
        async def stop_container(self, container_id: str, timeout: float) -> None: ...

        async def remove_container(self, container_id: str) -> None: ...

    async def update_runtime_config(self, *, pod_cidr: str) -> None:
        self.sandboxes.set_cidr(pod_cidr)
        if self.network is not None:
            await self.network.set_cidr(pod_cidr)

    async def run_pod_sandbox(self, config: PodSandboxConfig) -> str:
        try:
            self.cgroups.ensure_pod(config.cgroup_parent, config.resources)
        except OSError as err:
            raise RuntimeErrorStatus("FailedCreatePodSandBox", f"cannot create the pod cgroup {config.cgroup_parent}: {err}") from err
        if self.network is None or config.host_network:
            loopback_ports = self.network is None and not config.host_network and any(m[2] for m in config.port_mappings)
            if loopback_ports:
                check_mappings(config.port_mappings)
            sid = self.sandboxes.create(config)
            if loopback_ports:
                try:
                    await self.host_ports.open(sid, self.sandboxes.get(sid)["ip"], config.port_mappings)
                except RuntimeErrorStatus:
                    self.sandboxes.mark_stopped(sid)
                    self.sandboxes.delete(sid)
                    raise
            return sid
        sid = secrets.token_hex(32)
        return self.sandboxes.create(config, network=await self.network.setup(sid, config), sid=sid)

    async def stop_pod_sandbox(self, sandbox_id: str) -> None:
        self.sandboxes.get(sandbox_id)
        self.host_ports.close(sandbox_id)
        running = [c for c in self._containers.values() if c["sandbox_id"] == sandbox_id and c["state"] == ContainerState.RUNNING.value]
        await asyncio.gather(*(self.stop_container(c["id"], 0) for c in running))
        sb = self.sandboxes.get(sandbox_id)
        if self.network is not None and sb.get("netns"):
            await self.network.teardown(sandbox_id, sb["netns"])  # idempotent: a second stop is cheap
        self.sandboxes.mark_stopped(sandbox_id)

    async def remove_pod_sandbox(self, sandbox_id: str) -> None:
        if sandbox_id not in self.sandboxes.records:
            return
        await self.stop_pod_sandbox(sandbox_id)
        for c in [c for c in self._containers.values() if c["sandbox_id"] == sandbox_id]:
            await self.remove_container(c["id"])
        parent = self.sandboxes.get(sandbox_id)["config"].get("cgroup_parent", "")
        self.sandboxes.delete(sandbox_id)
        if parent and not any(sb["config"].get("cgroup_parent") == parent for sb in self.sandboxes.records.values()):
            self.cgroups.remove_pod(parent)

    async def pod_sandbox_status(self, sandbox_id: str) -> PodSandboxStatus:
        return self.sandboxes.status(self.sandboxes.get(sandbox_id))

    async def list_pod_sandboxes(self) -> Sequence[PodSandboxStatus]:
        return [self.sandboxes.status(sb) for sb in self.sandboxes.records.values()]
