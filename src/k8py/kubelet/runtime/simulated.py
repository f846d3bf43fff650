"""The simulated runtime: containers "run" on timers, with no processes (as kwok's).

A container starts after ``start_latency`` seconds, runs ``run_seconds``
(None: until stopped) and exits with ``exit_code``; a stop ends it at once
(exit 0 if it handles SIGTERM, i.e. always, here). Per pod, annotations
override the defaults (``<container>`` suffix for one container)::

    k8py.io/simulated-run-seconds: "5"          # every container
    k8py.io/simulated-run-seconds.web: "2"      # only "web"
    k8py.io/simulated-exit-code: "1"
    k8py.io/simulated-start-latency: "0.2"

The defaults come from ``--simulated-start-latency``, ``--simulated-run-seconds``
and ``--simulated-exit-code``. Images always pull (except ``InvalidImageName``); exec probes succeed; logs
are empty files. Everything lives in memory: a restart of the process
starts from nothing (simulated pods are then recreated by their workers).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from dataclasses import dataclass, replace
from typing import AsyncIterator, Mapping, Sequence

from k8py.kubelet.runtime.ipam import PodIPAllocator
from k8py.kubelet.runtime.process.images import normalized_tag, validate_reference
from k8py.kubelet.runtime.protocols import (
    ContainerConfig, ContainerEvent, ContainerEventType, ContainerState, ContainerStatus, ExecResult, ExecSpec, Image, ImageSpec,
    NotFoundError, PodSandboxConfig, PodSandboxStatus, RuntimeErrorStatus, RuntimeInfo, SandboxState,
)

__all__ = ["SimulatedRuntime", "SimulationDefaults"]

PREFIX = "k8py.io/simulated-"


@dataclass(frozen=True)
class SimulationDefaults:
    start_latency: float = 0.0
    run_seconds: float | None = None
    exit_code: int = 0


def _annotation(annotations: Mapping[str, str], key: str, container: str) -> str | None:
    return annotations.get(f"{PREFIX}{key}.{container}", annotations.get(f"{PREFIX}{key}"))


class SimulatedRuntime:
    def __init__(self, defaults: SimulationDefaults | None = None, *, node_ip: str = "127.0.0.1",
                 events: asyncio.Queue[ContainerEvent] | None = None) -> None:
        """``events``: a queue shared by many runtimes (the simulated nodes, one PLEG for all of them);
        the events carry their pod's uid."""
        self.defaults = defaults or SimulationDefaults()
        self.node_ip = node_ip
        self._sandboxes: dict[str, PodSandboxStatus] = {}
        self._containers: dict[str, ContainerStatus] = {}
        self._plans: dict[str, tuple[float, float | None, int]] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        # unbounded: one item per change, drained by the PLEG
        self._events: asyncio.Queue[ContainerEvent] = asyncio.Queue() if events is None else events
        self._ipam: PodIPAllocator | None = None
        self._images: set[str] = set()

    def info(self) -> RuntimeInfo:
        return RuntimeInfo("k8py-simulated", "0.1.0", enforces_limits=False, isolation="simulated: no processes")

    async def close(self) -> None:
        for t in self._timers.values():
            t.cancel()

    def container_events(self) -> AsyncIterator[ContainerEvent]:
        async def stream() -> AsyncIterator[ContainerEvent]:
            while True:
                yield await self._events.get()
        return stream()

    def _emit(self, kind: ContainerEventType, cs: ContainerStatus) -> None:
        uid = self._sandboxes[cs.sandbox_id].uid if cs.sandbox_id in self._sandboxes else ""
        self._events.put_nowait(ContainerEvent(kind, cs.id, cs.sandbox_id, uid, time.time()))

    async def update_runtime_config(self, *, pod_cidr: str) -> None:
        self._ipam = PodIPAllocator(pod_cidr)

    async def run_pod_sandbox(self, config: PodSandboxConfig) -> str:
        ip = self.node_ip if config.host_network or self._ipam is None else self._ipam.allocate()
        sid = secrets.token_hex(16)
        self._sandboxes[sid] = PodSandboxStatus(sid, config.name, config.namespace, config.uid, config.attempt, SandboxState.READY,
                                                time.time(), ip=ip, labels=dict(config.labels), annotations=dict(config.annotations))
        return sid

    def _sb(self, sid: str) -> PodSandboxStatus:
        try:
            return self._sandboxes[sid]
        except KeyError:
            raise NotFoundError(f"pod sandbox {sid} not found") from None

    async def stop_pod_sandbox(self, sandbox_id: str) -> None:
        sb = self._sb(sandbox_id)
        for cs in [c for c in self._containers.values() if c.sandbox_id == sandbox_id]:
            await self.stop_container(cs.id, 0)
        if sb.state is SandboxState.READY:
            if self._ipam is not None and sb.ip != self.node_ip:
                self._ipam.release(sb.ip)
            self._sandboxes[sandbox_id] = replace(sb, state=SandboxState.NOTREADY)

    async def remove_pod_sandbox(self, sandbox_id: str) -> None:
        if sandbox_id not in self._sandboxes:
            return
        await self.stop_pod_sandbox(sandbox_id)
        for cid in [c.id for c in self._containers.values() if c.sandbox_id == sandbox_id]:
            await self.remove_container(cid)
        del self._sandboxes[sandbox_id]

    async def pod_sandbox_status(self, sandbox_id: str) -> PodSandboxStatus:
        sb = self._sb(sandbox_id)
        return sb if sb.state is SandboxState.READY else replace(sb, ip="")

    async def list_pod_sandboxes(self) -> Sequence[PodSandboxStatus]:
        return list(self._sandboxes.values())

    async def create_container(self, sandbox_id: str, config: ContainerConfig, sandbox: PodSandboxConfig) -> str:
        self._sb(sandbox_id)
        ann = sandbox.annotations
        d = self.defaults
        latency = float(_annotation(ann, "start-latency", config.name) or d.start_latency)
        run = _annotation(ann, "run-seconds", config.name)
        run_s = float(run) if run is not None else d.run_seconds
        code = int(_annotation(ann, "exit-code", config.name) or d.exit_code)
        cid = secrets.token_hex(16)
        cs = ContainerStatus(id=cid, sandbox_id=sandbox_id, name=config.name, attempt=config.attempt, state=ContainerState.CREATED,
                             image=config.image, image_ref=f"sha256:{secrets.token_hex(8)}", created_at=time.time(),
                             labels=dict(config.labels), log_path=os.devnull)
        self._containers[cid] = cs
        self._plans[cid] = (latency, run_s, code)
        self._emit(ContainerEventType.CREATED, cs)
        return cid

    def _get(self, cid: str) -> ContainerStatus:
        try:
            return self._containers[cid]
        except KeyError:
            raise NotFoundError(f"container {cid} not found") from None

    async def start_container(self, container_id: str) -> None:
        cs = self._get(container_id)
        latency, run_s, code = self._plans[container_id]
        if latency > 0:
            await asyncio.sleep(latency)
        cs = self._containers[container_id] = replace(cs, state=ContainerState.RUNNING, started_at=time.time())
        self._emit(ContainerEventType.STARTED, cs)
        if run_s is not None:
            self._timers[container_id] = asyncio.get_running_loop().call_later(run_s, self._exit, container_id, code)

    def _exit(self, cid: str, code: int) -> None:
        cs = self._containers.get(cid)
        if cs is None or cs.state is not ContainerState.RUNNING:
            return
        self._timers.pop(cid, None)
        cs = self._containers[cid] = replace(cs, state=ContainerState.EXITED, finished_at=time.time(), exit_code=code,
                                             reason="Completed" if code == 0 else "Error")
        self._emit(ContainerEventType.STOPPED, cs)

    async def stop_container(self, container_id: str, timeout: float) -> None:
        cs = self._get(container_id)
        if cs.state is ContainerState.RUNNING:
            timer = self._timers.pop(container_id, None)
            if timer is not None:
                timer.cancel()
            self._exit(container_id, 0)

    async def remove_container(self, container_id: str) -> None:
        cs = self._containers.pop(container_id, None)
        if cs is None:
            return
        timer = self._timers.pop(container_id, None)
        if timer is not None:
            timer.cancel()
        self._plans.pop(container_id, None)
        self._emit(ContainerEventType.DELETED, cs)

    async def container_status(self, container_id: str) -> ContainerStatus:
        return self._get(container_id)

    async def list_containers(self, sandbox_id: str | None = None) -> Sequence[ContainerStatus]:
        return [c for c in self._containers.values() if sandbox_id is None or c.sandbox_id == sandbox_id]

    async def exec_spec(self, container_id: str, cmd: Sequence[str], *, tty: bool = False) -> ExecSpec:
        raise RuntimeErrorStatus("NotSupported", "the simulated runtime runs no processes: exec is not available")

    async def exec_sync(self, container_id: str, cmd: Sequence[str], timeout: float) -> ExecResult:
        self._get(container_id)
        return ExecResult(0, b"", b"")

    async def port_forward_address(self, sandbox_id: str, port: int) -> tuple[str, int]:
        raise RuntimeErrorStatus("NotSupported", "the simulated runtime runs no processes: port-forward is not available")

    def attach_fifo(self, container_id: str) -> str | None:
        return None

    async def pull_image(self, spec: ImageSpec) -> str:
        validate_reference(spec.image)
        self._images.add(spec.image)
        return f"sha256:{abs(hash(spec.image)):064x}"[:71]

    async def image_status(self, spec: ImageSpec) -> Image | None:
        validate_reference(spec.image)
        return Image(f"sha256:{abs(hash(spec.image)):064x}"[:71], [normalized_tag(spec.image)]) if spec.image in self._images else None

    async def list_images(self) -> Sequence[Image]:
        return [Image(f"sha256:{abs(hash(i)):064x}"[:71], [normalized_tag(i)]) for i in sorted(self._images)]

    async def remove_image(self, spec: ImageSpec) -> None:
        self._images.discard(spec.image)
