"""The kubelet's runtime protocols (:mod:`k8py.kubelet.runtime.protocols`) on a CRI runtime.

:class:`CRIRuntime` turns each protocol call into the CRI call of the same
name on :class:`~.client.CRIClient`; :mod:`.convert` converts between k8py's
dataclasses and the protobuf messages (times, the pod cgroup below
``cgroup_root``, resources, run-as ids, namespaces).

Container events (:mod:`.events`): the runtime's ``GetContainerEvents``
stream when it has one, relisting every ``poll_interval`` seconds when it has
not (containerd 1.6; then containerd's own task-exit events make it relist
at once) or the stream breaks, and every ``evented_relist_period`` beside a
working stream.

``ExecSync`` serves exec probes and hooks. ``kubectl exec``, ``attach`` and
``port-forward`` go through the runtime's streaming server
(:class:`~k8py.kubelet.runtime.protocols.RemoteStreamingRuntime`): CRI
``Exec``/``Attach``/``PortForward`` return a one-time URL, opened over SPDY by
:mod:`.streams`; the kubelet's server relays its client to it
(``exec_spec`` is refused: nothing runs as a kubelet subprocess).
``port_forward_address`` (the pod IP over the CNI bridge) is kept for callers
that want a plain address. Resource usage is the runtime's
(``ListContainerStats``: containerd reads the containers' cgroups).
Health (:meth:`CRIRuntime.health_errors`): the runtime's RuntimeReady and
NetworkReady conditions, which the node's Ready condition follows.
``hostNetwork`` pods: the sandbox and its containers in the node's network
namespace (``NamespaceMode.NODE``), the node's IP (``node_ip``) as pod IP.

Images: pulls through the runtime (``PullImage`` with each credential in
turn), and with ``image_gc`` the runtime's images collected by disk
thresholds as upstream's kubelet collects them (:mod:`.image_gc`). Logs:
containerd writes them; with ``log_rotation`` the kubelet rotates them
(:mod:`.log_rotation`, CRI ``ReopenContainerLog``).

Invariants: every CRI failure reaches the kubelet as NotFoundError or
RuntimeErrorStatus with containerd's message; pulls try each credential in
order and report the last failure as ``ErrImagePull``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from typing import AsyncIterator, Sequence

import grpc

from k8py.kubelet.images.gc import GCPolicy
from k8py.kubelet.runtime.cri.client import CRIClient, CRIError, pb
from k8py.kubelet.runtime.cri.convert import HOST_NETWORK_ANNOTATION, container_config, sandbox_config, seconds
from k8py.kubelet.runtime.cri.convert import container_status as status_of
from k8py.kubelet.runtime.cri.events import ContainerEvents
from k8py.kubelet.runtime.cri.image_gc import CRIImageGC
from k8py.kubelet.runtime.cri.log_rotation import ContainerLogRotation
from k8py.kubelet.runtime.cri.streams import RemoteCommand, port_forward_connection
from k8py.kubelet.runtime.protocols import (ContainerConfig, ContainerEvent, ContainerUsage,
                                            ContainerStatus, ExecResult, ExecSpec, Image, ImageSpec, InterfaceUsage, NotFoundError,
                                            PodNetworkUsage, PodSandboxConfig, PodSandboxStatus, RuntimeErrorStatus,
                                            RuntimeInfo, SandboxState)

__all__ = ["CRIRuntime"]

log = logging.getLogger(__name__)

#: seconds without an answer to ``Status`` after which the runtime is down (upstream's baseRuntimeSyncThreshold)
RUNTIME_DOWN_AFTER = 30.0


class CRIRuntime:
    def __init__(self, client: CRIClient, *, cgroup_root: str = "/k8py", poll_interval: float = 1.0,
                 evented_relist_period: float = 300.0, node_ip: str = "127.0.0.1", image_gc: GCPolicy | None = None,
                 log_rotation: tuple[int, int] | None = None, clock=time.time) -> None:
        """``image_gc``: the thresholds the runtime's images are collected by; ``log_rotation``: (containerLogMaxSize,
        containerLogMaxFiles) the containers' logs are rotated by; each runs once connected (None: never)."""
        self.client = client
        self.image_gc = CRIImageGC(client, image_gc, clock=clock) if image_gc is not None else None
        self.log_rotation = (ContainerLogRotation(client, max_size=log_rotation[0], max_files=log_rotation[1], clock=clock)
                             if log_rotation is not None else None)
        self._tasks: list[asyncio.Task[None]] = []
        #: where the runtime keeps its images (CRI ImageFsInfo), read on connect: the eviction manager's imagefs
        self.image_fs_path = ""
        self.cgroup_root = "/" + cgroup_root.strip("/")
        self.poll_interval = poll_interval
        #: the IP host-network pods report
        self.node_ip = node_ip
        self._events = ContainerEvents(client, poll_interval=poll_interval, evented_relist_period=evented_relist_period,
                                       clock=clock)
        self._clock = clock
        self._version: pb.VersionResponse | None = None
        self._last_status_ok = clock()

    async def connect(self) -> "CRIRuntime":
        """Ask the runtime for its version (fails fast with a clear message when the socket is wrong)."""
        try:
            self._version = await self.client.version(timeout=30)
        except CRIError as e:
            raise RuntimeErrorStatus("RuntimeUnavailable", f"no CRI runtime at {self.client.endpoint}: {e.details}; "
                                     "is containerd running with its CRI plugin?") from e
        try:
            self.image_fs_path = next((f.fs_id.mountpoint for f in await self.client.image_fs_info(timeout=30)
                                       if f.fs_id.mountpoint), "")
        except (CRIError, NotFoundError) as e:
            log.info("the runtime did not say where its images are (%s): imagefs is the kubelet's own", e)
        if not self._tasks:
            if self.image_gc is not None:
                self._tasks.append(asyncio.create_task(self.image_gc.run(), name="cri-image-gc"))
            if self.log_rotation is not None:
                self._tasks.append(asyncio.create_task(self.log_rotation.run(), name="cri-log-rotation"))
        return self

    def info(self) -> RuntimeInfo:
        v = self._version
        name, version = (v.runtime_name, v.runtime_version) if v is not None else ("cri", "")
        return RuntimeInfo(name, version, enforces_limits=True,
                           isolation=f"{name} {version} over CRI v1 at {self.client.endpoint} (cgroups below {self.cgroup_root})")

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        await self.client.close()

    # --- sandboxes ----------------------------------------------------------------------

    async def health_errors(self) -> list[str]:
        """Upstream's ``updateRuntimeUp`` checks: CRI ``Status``'s RuntimeReady and NetworkReady, in its words
        (``container runtime network not ready: NetworkReady=false reason:… message:…``); a runtime that has not
        answered for ``RUNTIME_DOWN_AFTER`` seconds is down."""
        try:
            status = await self.client.status(timeout=10)
        except (CRIError, NotFoundError) as e:
            log.warning("container runtime status check failed: %s", e)
            if self._clock() - self._last_status_ok >= RUNTIME_DOWN_AFTER:
                return ["container runtime is down"]
            return []
        self._last_status_ok = self._clock()
        conditions = {c.type: c for c in status.status.conditions}
        errors = []
        for kind, what in (("RuntimeReady", "container runtime not ready"), ("NetworkReady", "container runtime network not ready")):
            c = conditions.get(kind)
            if c is None:
                errors.append(f"{what}: {kind} not reported")
            elif not c.status:
                errors.append(f"{what}: {kind}=false reason:{c.reason} message:{c.message}")
        return errors

    async def update_runtime_config(self, *, pod_cidr: str) -> None:
        """Pass the node's pod CIDR on, as upstream's kubelet does: containerd writes its CNI config from its
        ``conf_template`` with it (a runtime without a template keeps its own CNI config, and says so in its log)."""
        try:
            await self.client.update_runtime_config(pod_cidr)
        except CRIError as e:  # as upstream: logged, pods then fail with the runtime's "network not ready"
            log.error("the CRI runtime refused the pod CIDR %s: %s", pod_cidr, e.details)

    async def run_pod_sandbox(self, config: PodSandboxConfig) -> str:
        try:
            return await self.client.run_pod_sandbox(sandbox_config(config, self.cgroup_root))
        except CRIError as e:
            raise RuntimeErrorStatus("CreatePodSandboxError", e.details) from e

    async def stop_pod_sandbox(self, sandbox_id: str) -> None:
        try:
            await self.client.stop_pod_sandbox(sandbox_id)
        except NotFoundError:
            pass

    async def remove_pod_sandbox(self, sandbox_id: str) -> None:
        try:
            await self.client.remove_pod_sandbox(sandbox_id)
        except NotFoundError:
            pass

    async def pod_sandbox_status(self, sandbox_id: str) -> PodSandboxStatus:
        s = await self.client.pod_sandbox_status(sandbox_id)
        m = s.metadata
        return PodSandboxStatus(id=s.id, name=m.name, namespace=m.namespace, uid=m.uid, attempt=m.attempt,
                                state=SandboxState.READY if s.state == pb.SANDBOX_READY else SandboxState.NOTREADY,
                                created_at=seconds(s.created_at),
                                # a host-network pod's IP is the node's (the runtime reports none), as upstream
                                ip=s.network.ip or (self.node_ip if s.annotations.get(HOST_NETWORK_ANNOTATION) else ""),
                                additional_ips=[ip.ip for ip in s.network.additional_ips],
                                labels=dict(s.labels),
                                annotations={k: v for k, v in s.annotations.items() if k != HOST_NETWORK_ANNOTATION})

    async def list_pod_sandboxes(self) -> Sequence[PodSandboxStatus]:
        out = []
        for item in await self.client.list_pod_sandbox():
            try:
                out.append(await self.pod_sandbox_status(item.id))
            except NotFoundError:
                continue  # removed meanwhile
        return out

    # --- containers ---------------------------------------------------------------------

    async def create_container(self, sandbox_id: str, config: ContainerConfig, sandbox: PodSandboxConfig) -> str:
        try:
            return await self.client.create_container(sandbox_id, container_config(config, host_network=sandbox.host_network),
                                                      sandbox_config(sandbox, self.cgroup_root))
        except CRIError as e:
            raise RuntimeErrorStatus("CreateContainerError", e.details) from e

    async def start_container(self, container_id: str) -> None:
        try:
            await self.client.start_container(container_id)
        except CRIError as e:
            raise RuntimeErrorStatus("RunContainerError", e.details) from e

    async def stop_container(self, container_id: str, timeout: float) -> None:
        try:
            await self.client.stop_container(container_id, max(0, math.ceil(timeout)))
        except NotFoundError:
            pass

    async def remove_container(self, container_id: str) -> None:
        try:
            await self.client.remove_container(container_id)
        except NotFoundError:
            pass

    async def container_status(self, container_id: str) -> ContainerStatus:
        s = await self.client.container_status(container_id)
        listed = [c for c in await self.client.list_containers() if c.id == s.id]
        return status_of(s, listed[0].pod_sandbox_id if listed else "")

    async def list_containers(self, sandbox_id: str | None = None) -> Sequence[ContainerStatus]:
        out = []
        for c in await self.client.list_containers(sandbox_id or ""):
            try:
                out.append(status_of(await self.client.container_status(c.id), c.pod_sandbox_id))
            except NotFoundError:
                continue
        return out

    def container_events(self) -> AsyncIterator[ContainerEvent]:
        return self._events.events()

    # --- streaming: through the runtime's streaming server (streams.py) ----------------------

    async def exec_spec(self, container_id: str, cmd: Sequence[str], *, tty: bool = False) -> ExecSpec:
        raise RuntimeErrorStatus("ExecError", "the CRI runtime runs exec sessions itself (exec_stream), not as a kubelet "
                                 "subprocess")

    async def _streaming_url(self, what: str, call) -> str:
        try:
            return await call
        except CRIError as e:
            raise RuntimeErrorStatus(f"{what}Error", e.details) from e

    async def exec_stream(self, container_id: str, cmd: Sequence[str], *, stdin: bool, stdout: bool, stderr: bool,
                          tty: bool) -> RemoteCommand:
        url = await self._streaming_url("Exec", self.client.exec(container_id, list(cmd), stdin=stdin, stdout=stdout,
                                                                 stderr=stderr and not tty, tty=tty))
        return await self._open_stream(url, stdin=stdin, stdout=stdout, stderr=stderr, tty=tty)

    async def attach_stream(self, container_id: str, *, stdin: bool, stdout: bool, stderr: bool, tty: bool) -> RemoteCommand:
        url = await self._streaming_url("Attach", self.client.attach(container_id, stdin=stdin, stdout=stdout,
                                                                     stderr=stderr and not tty, tty=tty))
        return await self._open_stream(url, stdin=stdin, stdout=stdout, stderr=stderr, tty=tty)

    async def _open_stream(self, url: str, **flags: bool) -> RemoteCommand:
        try:
            return await RemoteCommand.open(url, **flags)
        except (OSError, asyncio.TimeoutError) as e:
            raise RuntimeErrorStatus("StreamError", f"cannot stream from the runtime at {url}: {e}") from e

    async def port_forward_stream(self, sandbox_id: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        url = await self._streaming_url("PortForward", self.client.port_forward(sandbox_id, [port]))
        return await port_forward_connection(url, port)

    async def exec_sync(self, container_id: str, cmd: Sequence[str], timeout: float) -> ExecResult:
        seconds = max(1, math.ceil(timeout)) if timeout else 0
        try:
            r = await self.client.exec_sync(container_id, list(cmd), seconds)
        except CRIError as e:
            if e.code == grpc.StatusCode.DEADLINE_EXCEEDED or "timeout" in e.details.lower():
                return ExecResult(-1, b"", e.details.encode(), timed_out=True)
            raise RuntimeErrorStatus("ExecError", e.details) from e
        return ExecResult(r.exit_code, r.stdout, r.stderr)

    async def port_forward_address(self, sandbox_id: str, port: int) -> tuple[str, int]:
        ip = (await self.pod_sandbox_status(sandbox_id)).ip
        if not ip:
            raise RuntimeErrorStatus("PortForwardError", f"sandbox {sandbox_id} has no IP")
        return ip, port

    def attach_fifo(self, container_id: str) -> str | None:
        return None

    # --- stats ----------------------------------------------------------------------------

    async def list_container_stats(self) -> Sequence[ContainerUsage]:
        """CRI ``ListContainerStats``: each container's CPU (cumulative) and memory working set, as the runtime
        reads them from its cgroups. A container the runtime has no figures for yet (just started) is left out."""
        out = []
        for s in await self.client.list_container_stats():
            if not s.attributes.id or not s.cpu.timestamp:
                continue
            out.append(ContainerUsage(s.attributes.id, s.cpu.usage_core_nano_seconds.value / 1e9,
                                      s.memory.working_set_bytes.value, seconds(s.cpu.timestamp) or self._clock()))
        return out

    async def list_pod_network_stats(self) -> Sequence[PodNetworkUsage]:
        """CRI ``ListPodSandboxStats``, the network part: each pod's interfaces (its default one first) as the
        runtime reads them in the pod's network namespace. Host-network pods and pods not measured yet are left out."""
        try:
            stats = await self.client.list_pod_sandbox_stats()
        except CRIError as e:
            # containerd 1.6 fails the whole list for one sandbox it cannot measure (one that stopped, a
            # host-network one): ask each ready sandbox instead, leaving out those that fail
            log.debug("ListPodSandboxStats failed (%s): asking each sandbox", e.details)
            stats = []
            for sandbox in await self.client.list_pod_sandbox():
                if sandbox.state != pb.SANDBOX_READY:
                    continue
                try:
                    stats.append(await self.client.pod_sandbox_stats(sandbox.id))
                except (CRIError, NotFoundError):
                    continue
        out = []
        for s in stats:
            net = s.linux.network
            if not s.attributes.metadata.uid or not net.default_interface.name:
                continue
            default = net.default_interface.name
            ifaces = [net.default_interface] + [i for i in net.interfaces if i.name != default]
            # containerd 1.6 stamps the CPU figures but not the network's: the sample's time is the same
            when = seconds(net.timestamp or s.linux.cpu.timestamp) or self._clock()
            out.append(PodNetworkUsage(s.attributes.metadata.uid, when, [
                InterfaceUsage(i.name, i.rx_bytes.value, i.tx_bytes.value, i.rx_errors.value, i.tx_errors.value)
                for i in ifaces]))
        return out

    # --- images -------------------------------------------------------------------------

    async def pull_image(self, spec: ImageSpec) -> str:
        last = ""
        for auth in list(spec.auth) or [None]:
            try:
                if auth is None:
                    return await self.client.pull_image(spec.image)
                return await self.client.pull_image(spec.image, username=auth.username, password=auth.password)
            except (CRIError, NotFoundError) as e:
                last = e.details if isinstance(e, CRIError) else str(e)
        raise RuntimeErrorStatus("ErrImagePull", last)

    async def image_status(self, spec: ImageSpec) -> Image | None:
        img = await self.client.image_status(spec.image)
        return None if img is None else Image(img.id, list(img.repo_tags), list(img.repo_digests), img.size)

    async def list_images(self) -> Sequence[Image]:
        return [Image(i.id, list(i.repo_tags), list(i.repo_digests), i.size) for i in await self.client.list_images()]

    async def remove_image(self, spec: ImageSpec) -> None:
        try:
            await self.client.remove_image(spec.image)
        except NotFoundError:
            pass
