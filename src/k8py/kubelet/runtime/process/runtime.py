"""ProcessRuntime: the runtime protocols over host processes.

See the package docstring for the pieces; the sandbox calls are in
:mod:`.sandbox_lifecycle`, the streaming ones in :mod:`.streaming`. Concurrency: every method runs on
the kubelet's event loop; one waiter task per running container turns the
process's exit into an EXITED state and a STOPPED event at once (the
kubelet is the parent; for adopted containers a pidfd says when they end).
The event queue is unbounded on purpose: it carries one item per lifecycle
change of containers this node runs and its single consumer (the PLEG)
drains it without I/O; dropping one would leave a pod stale.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import time
from typing import Any, AsyncIterator, Sequence

import k8py
from k8py.kubelet.network.pod_network import CNIPodNetwork
from k8py.kubelet.runtime.process import adoption, launcher, oci_container, spawn
from k8py.kubelet.runtime.process.container_record import add_image_dirs, new_record, status_of
from k8py.kubelet.runtime.process.cgroups import CgroupManager
from k8py.kubelet.runtime.process.host_ports import HostPorts
from k8py.kubelet.runtime.process.image_service import ProcessImages
from k8py.kubelet.runtime.process.images import ImageCatalog
from k8py.kubelet.runtime.process.log_pump import ContainerLog
from k8py.kubelet.runtime.process.sandbox_lifecycle import SandboxLifecycle
from k8py.kubelet.runtime.process.sandboxes import Sandboxes
from k8py.kubelet.runtime.process.streaming import StreamingEndpoints
from k8py.kubelet.runtime.process.terminal import Terminal
from k8py.kubelet.runtime.process.records import disk_usage, is_same_process, process_start_ticks, read_records, write_record
from k8py.kubelet.runtime.protocols import (
    ContainerConfig, ContainerEvent, ContainerEventType, ContainerState, ContainerStatus, Image, ImageSpec, NotFoundError,
    PodSandboxConfig, RuntimeErrorStatus, RuntimeInfo, SandboxState,
)

__all__ = ["ProcessRuntime"]

logger = logging.getLogger(__name__)

RUNTIME_NAME = "k8py-process"


class ProcessRuntime(SandboxLifecycle, StreamingEndpoints):
    def __init__(self, state_dir: str, *, catalog: ImageCatalog | None = None, use_bwrap: bool = True,
                 node_ip: str = "127.0.0.1", log_max_size: int = 10 * 1024 * 1024, log_max_files: int = 5,
                 cgroup_name: str = "kubelet", use_cgroups: bool = True, images: ProcessImages | None = None,
                 network: CNIPodNetwork | None = None) -> None:
        self.state_dir = state_dir
        self.catalog = catalog or ImageCatalog()
        #: registry images (pulled into the node's store) and the catalog: see image_service
        self.images = images or ProcessImages(self.catalog, None)
        self.bwrap = launcher.bwrap_path(disabled=not use_bwrap)
        self.node_ip = node_ip
        self.cgroups = CgroupManager(cgroup_name, enabled=use_cgroups)
        self.log_max_size = log_max_size
        self.log_max_files = log_max_files
        self.sandboxes = Sandboxes(state_dir, node_ip=node_ip)
        #: per-pod network namespaces (--pod-network=cni); None: every pod on the host's network
        self.network = network
        #: hostPort relays of the loopback pod network (a CNI network maps them itself)
        self.host_ports = HostPorts(node_ip)
        self._containers: dict[str, dict[str, Any]] = {}
        self._exited: dict[str, asyncio.Event] = {}
        self._logs: dict[str, ContainerLog] = {}
        self._terminals: dict[str, Terminal] = {}
        self._waiters: dict[str, asyncio.Task[None]] = {}
        self._events: asyncio.Queue[ContainerEvent] = asyncio.Queue()
        #: whether this node can mount overlays (:func:`oci_container.overlay_mode`), asked at start
        self._overlay_probe: asyncio.Task[str] | None = None
        os.makedirs(os.path.join(state_dir, "containers"), exist_ok=True)

    # -- lifecycle -----------------------------------------------------------------------

    def info(self) -> RuntimeInfo:
        iso = ("bubblewrap: own pid/ipc/uts namespaces, private /tmp, read-only host view, volumes at mountPath"
               if self.bwrap else "plain host processes (bwrap not found): no namespaces, volumes under the pod dir")
        if self.images.puller is not None:
            iso += "; registry images in their own rootfs" if self.bwrap else "; registry images need bwrap"
        if self.network is not None:
            iso += "; " + self.network.describe()
        iso += "; " + self.cgroups.describe() + ("; securityContext through setpriv" if os.geteuid() == 0 and shutil.which("setpriv") else "")
        return RuntimeInfo(RUNTIME_NAME, k8py.__version__, enforces_limits=self.cgroups.enabled, isolation=iso)

    async def start(self) -> None:
        """Load the state on disk and adopt the containers still running."""
        self.sandboxes.load()
        for rec in read_records(os.path.join(self.state_dir, "containers"), "record.json"):
            self._containers[rec["id"]] = rec
            self._exited[rec["id"]] = asyncio.Event()
            if rec["state"] == ContainerState.RUNNING.value:
                self._adopt(rec)
            else:
                self._exited[rec["id"]].set()
        self.images.remember(c["image"] for c in self._containers.values())
        for sb in self.sandboxes.records.values():
            cfg = sb["config"]
            if sb["state"] == SandboxState.READY.value and cfg.get("port_mappings") and not cfg.get("host_network") and not sb.get("netns"):
                try:
                    await self.host_ports.open(sb["id"], sb["ip"], [tuple(m) for m in cfg["port_mappings"]])
                except RuntimeErrorStatus as err:
                    logger.warning("hostPort not re-opened", extra={"sandbox": sb["id"], "error": err.message})
        self.images.start_gc(lambda: {c["image_id"] for c in self._containers.values() if c.get("image_id")})
        if self.bwrap:  # asked now, in a thread: the first container's start would wait for the probe's mount namespaces
            self._overlay_probe = asyncio.create_task(asyncio.to_thread(oci_container.overlay_mode, self.state_dir),
                                                      name="overlay-probe")

    def _adopt(self, rec: dict[str, Any]) -> None:
        cdir = self._cdir(rec["id"])
        adopted = adoption.adopt(rec, cdir, log_max_size=self.log_max_size, log_max_files=self.log_max_files,
                                 on_exit=lambda code, reason: self._mark_exited(rec, code, reason))
        if adopted is not None:
            self._logs[rec["id"]] = adopted.log
            if adopted.terminal is not None:
                self._terminals[rec["id"]] = adopted.terminal

    async def _overlay(self) -> str:
        if self._overlay_probe is not None:
            with contextlib.suppress(Exception):  # (asked again below)
                await asyncio.shield(self._overlay_probe)
        return oci_container.overlay_mode(self.state_dir)

    async def close(self) -> None:
        if self._overlay_probe is not None and not self._overlay_probe.done():
            self._overlay_probe.cancel()  # (the probe's thread ends by itself)
        for task in list(self._waiters.values()):
            task.cancel()
        await asyncio.gather(*self._waiters.values(), return_exceptions=True)
        for log in self._logs.values():
            log.close()
        self.cgroups.close()
        await self.images.close()
        await self.host_ports.close_all()
        if self.network is not None and not self.sandboxes.records:
            await self.network.cleanup()  # no pod left to adopt: the bridge and its routes go too

    def container_events(self) -> AsyncIterator[ContainerEvent]:
        async def stream() -> AsyncIterator[ContainerEvent]:
            while True:
                yield await self._events.get()
        return stream()

    def _emit(self, kind: ContainerEventType, rec: dict[str, Any]) -> None:
        self._events.put_nowait(ContainerEvent(kind, rec["id"], rec["sandbox_id"], rec["pod_uid"], time.time()))

    # -- containers -----------------------------------------------------------------------

    def _cdir(self, cid: str) -> str:
        return os.path.join(self.state_dir, "containers", cid)

    def _save(self, rec: dict[str, Any]) -> None:
        write_record(os.path.join(self._cdir(rec["id"]), "record.json"), rec)

    async def create_container(self, sandbox_id: str, config: ContainerConfig, sandbox: PodSandboxConfig) -> str:
        sb = self.sandboxes.get(sandbox_id)
        rec = new_record(self.images, self.catalog, config, sandbox, sb, bwrap=bool(self.bwrap))
        if config.target_container_id:
            self._rec(config.target_container_id)  # NotFound for a target that is gone
        cid = rec["id"]
        os.makedirs(self._cdir(cid), exist_ok=True)
        if "rootfs" not in rec and self.bwrap:
            add_image_dirs(rec, os.path.join(self._cdir(cid), "layer"), self.catalog.resolve(config.image).image_dirs)
        self._containers[cid] = rec
        self._exited[cid] = asyncio.Event()
        self._save(rec)
        self._emit(ContainerEventType.CREATED, rec)
        return cid

    def _rec(self, cid: str) -> dict[str, Any]:
        try:
            return self._containers[cid]
        except KeyError:
            raise NotFoundError(f"container {cid} not found") from None

    async def start_container(self, container_id: str) -> None:
        rec = self._rec(container_id)
        if rec["state"] != ContainerState.CREATED.value:
            raise RuntimeErrorStatus("RunContainerError", f"container {container_id} is {rec['state']}, not created")
        try:
            spawn.check_command(rec)
        except RuntimeErrorStatus as err:
            self._mark_exited(rec, 128, "StartError", err.message)
            raise
        sb = self.sandboxes.get(rec["sandbox_id"])
        target = self._containers.get(rec.get("target") or "")
        join_pid = launcher.command_pid(target["pid"], self._ns_init(target), target["bwrap"]) if target else 0
        if rec.get("target") and not join_pid:
            self._mark_exited(rec, 128, "StartError", "its target container is not running")
            raise RuntimeErrorStatus("RunContainerError", "cannot join the process namespace of the target container: it is not running")
        try:
            started = await spawn.spawn(rec, cdir=self._cdir(container_id), bwrap=self.bwrap, cgroups=self.cgroups, join_pid=join_pid,
                                        cgroup_parent=sb["config"].get("cgroup_parent", ""), netns=sb.get("netns", ""),
                                        overlay=await self._overlay() if rec.get("rootfs") or rec["bwrap"] else "",
                                        log_max_size=self.log_max_size, log_max_files=self.log_max_files)
        except OSError as err:
            self._mark_exited(rec, 128, "StartError", str(err))
            raise RuntimeErrorStatus("RunContainerError", f"cannot start the container process: {err}") from err
        proc = started.proc
        self._logs[container_id] = started.log
        if started.terminal is not None:
            self._terminals[container_id] = started.terminal
        rec.update(state=ContainerState.RUNNING.value, started_at=time.time(), pid=proc.pid, start_ticks=process_start_ticks(proc.pid))
        self._save(rec)
        self._waiters[container_id] = asyncio.create_task(self._wait(rec, proc), name=f"container-wait-{container_id[:12]}")
        if rec["bwrap"] and await spawn.await_command(rec, lambda: self._ns_init(rec)):
            self._save(rec)
        self._emit(ContainerEventType.STARTED, rec)

    async def _wait(self, rec: dict[str, Any], proc: asyncio.subprocess.Process) -> None:
        rc = await proc.wait()
        # the main process is gone: so is everything else in the container (its
        # pid is reaped now, so only the namespace's init or the group is signalled)
        ns_init = self._ns_init(rec)
        if rec["bwrap"] and ns_init:
            launcher.signal_container(0, ns_init, True, signal.SIGKILL)
        elif not rec["bwrap"]:
            launcher.signal_container(rec["pid"], 0, False, signal.SIGKILL)
        log = self._logs.get(rec["id"])
        if log is not None:
            try:
                await asyncio.wait_for(log.closed.wait(), 2.0)
            except asyncio.TimeoutError:  # a daemonised child still holds the output (plain mode)
                pass
        self._waiters.pop(rec["id"], None)
        self._mark_exited(rec, rc if rc >= 0 else 128 - rc)

    def _mark_exited(self, rec: dict[str, Any], code: int, reason: str = "", message: str = "") -> None:
        if rec["state"] == ContainerState.EXITED.value:
            return
        log = self._logs.pop(rec["id"], None)
        if log is not None:
            log.close()
        terminal = self._terminals.pop(rec["id"], None)
        if terminal is not None:
            terminal.close()
        dirs = rec.get("cgroups") or []
        if not reason and CgroupManager.oom_killed(dirs):
            # as containerd: an OOM kill in the container's cgroup makes it OOMKilled, whatever the exit
            # code (a child killed, the main process exiting 1 on it, is OOMKilled too)
            reason = "OOMKilled"
        CgroupManager.remove(dirs)
        rec.update(state=ContainerState.EXITED.value, finished_at=time.time(), exit_code=code, pid=0,
                   reason=reason or ("Completed" if code == 0 else "Error"), message=message)
        self._save(rec)
        self._exited[rec["id"]].set()
        self._emit(ContainerEventType.STOPPED, rec)

    def _ns_init(self, rec: dict[str, Any]) -> int:
        if rec["bwrap"] and not rec["ns_init"]:
            rec["ns_init"], _ = launcher.read_status_file(os.path.join(self._cdir(rec["id"]), "bwrap-status.json"))
        return int(rec["ns_init"])

    async def stop_container(self, container_id: str, timeout: float) -> None:
        rec = self._rec(container_id)
        if rec["state"] != ContainerState.RUNNING.value:
            return
        exited = self._exited[container_id]
        if timeout > 0:
            launcher.signal_container(rec["pid"], self._ns_init(rec), rec["bwrap"], signal.SIGTERM)
            try:
                await asyncio.wait_for(exited.wait(), timeout)
                return
            except asyncio.TimeoutError:
                pass
        launcher.signal_container(rec["pid"], self._ns_init(rec), rec["bwrap"], signal.SIGKILL)
        if not rec["bwrap"]:
            launcher.signal_container(rec["pid"], 0, False, signal.SIGKILL)
        await exited.wait()

    async def remove_container(self, container_id: str) -> None:
        rec = self._containers.get(container_id)
        if rec is None:
            return
        await self.stop_container(container_id, 0)
        holder = rec.get("console") or [0, 0]
        if is_same_process(holder[0], holder[1]):  # it ends with the container; one that lingers goes now
            os.kill(holder[0], signal.SIGKILL)
        self._containers.pop(container_id, None)
        self._exited.pop(container_id, None)
        CgroupManager.remove(rec.get("cgroups") or [])
        shutil.rmtree(self._cdir(container_id), ignore_errors=True)
        self._emit(ContainerEventType.DELETED, rec)

    async def container_status(self, container_id: str) -> ContainerStatus:
        return status_of(self._rec(container_id))

    async def list_containers(self, sandbox_id: str | None = None) -> Sequence[ContainerStatus]:
        return [status_of(c) for c in self._containers.values() if sandbox_id is None or c["sandbox_id"] == sandbox_id]

    def root_path(self, container_id: str, path: str) -> str:
        """Where ``path`` inside the container is on the host (for terminationMessagePath)."""
        rec = self._rec(container_id)
        for cpath, hpath, _ in sorted(rec["mounts"], key=lambda m: -len(m[0])):
            base = cpath.rstrip("/")
            if path == base or path.startswith(base + "/"):
                return hpath + path[len(base):]
        return path

    def writable_layer_bytes(self, container_id: str) -> int:
        """Disk the container's own layer holds (its directory: image-dir copies, an overlay's upper layer)."""
        return disk_usage(self._cdir(container_id))

    # -- images ---------------------------------------------------------------------------

    async def pull_image(self, spec: ImageSpec) -> str:
        return await self.images.pull(spec)

    async def image_status(self, spec: ImageSpec) -> Image | None:
        return await self.images.status(spec)

    async def list_images(self) -> Sequence[Image]:
        return await self.images.list()

    async def remove_image(self, spec: ImageSpec) -> None:
        await self.images.remove(spec)
