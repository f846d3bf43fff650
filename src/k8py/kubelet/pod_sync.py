"""syncPod, terminatePod and cleanup: what a pod worker does at each step.

``sync_pod`` reads the runtime's state for the pod, asks
:func:`~k8py.kubelet.pod_actions.compute_pod_actions` for a plan, carries
it out (sandbox, kills, init containers one by one, containers), then
hands the status it computes to the status manager. It also enforces
``activeDeadlineSeconds`` (→ Failed, ``DeadlineExceeded``) and notices a
pod that reached a terminal phase (the worker then terminates it).

``terminate_pod`` stops the regular containers together (each: preStop
hook, then SIGTERM with what remains of the grace period, then SIGKILL),
then the sidecars in reverse order, then the sandbox, and writes the final
status: a pod stopped before finishing on its own ends ``Failed`` if any
container exited non-zero, else ``Succeeded`` (upstream since 1.27).
"""

from __future__ import annotations

import asyncio
import calendar
import logging
import time
from dataclasses import replace
from typing import Any, Awaitable, Callable, Mapping, Sequence

from k8py.kubelet.config import KubeletConfig
from k8py.kubelet.backoff import Backoff
from k8py.kubelet.cgroups import qos
from k8py.kubelet.container_start import start_container
from k8py.kubelet.hooks import run_hook
from k8py.kubelet.metrics import KubeletMetrics
from k8py.kubelet.pod_actions import compute_pod_actions
from k8py.kubelet.pod_status import ContainerView, PodView, build_pod_status, qos_class, ts
from k8py.kubelet.pod_workers import PodWorker
from k8py.kubelet.prober.manager import ProbeManager
from k8py.kubelet.runtime.protocols import (
    ContainerState, ContainerStatus, NotFoundError, PodSandboxConfig, PodSandboxStatus, Runtime, RuntimeErrorStatus, SandboxState,
    pod_log_directory,
)
from k8py.kubelet.status_manager import StatusManager
from k8py.kubelet.volumes.manager import MountError, VolumeManager

__all__ = ["PodSyncer"]

logger = logging.getLogger(__name__)


def _parse_ts(value: str) -> float:
    return float(calendar.timegm(time.strptime(value[:19], "%Y-%m-%dT%H:%M:%S")))


def _log_tail(path: str, lines: int = 80, limit: int = 2048) -> str:
    try:
        with open(path, "rb") as f:
            records = f.read().splitlines()[-lines:]
    except OSError:
        return ""
    out = []
    for rec in records:
        parts = rec.split(b" ", 3)
        if len(parts) == 4:
            out.append(parts[3] + (b"\n" if parts[2] == b"F" else b""))
    return b"".join(out)[-limit:].decode("utf-8", "replace")


def _by_name(containers: Sequence[ContainerStatus]) -> tuple[dict[str, ContainerStatus], dict[str, ContainerStatus]]:
    latest: dict[str, ContainerStatus] = {}
    previous: dict[str, ContainerStatus] = {}
    for cs in sorted(containers, key=lambda c: (c.attempt, c.created_at)):
        if cs.name in latest:
            previous[cs.name] = latest[cs.name]
        latest[cs.name] = cs
    return latest, previous


def _all_containers(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Init, regular and ephemeral containers (names are unique across all three)."""
    return [*(spec.get("initContainers") or []), *(spec.get("containers") or []), *(spec.get("ephemeralContainers") or [])]


class PodSyncer:
    def __init__(self, *, runtime: Runtime, config: KubeletConfig, status: StatusManager, volumes: VolumeManager,
                 event: Callable[[Mapping[str, Any], str, str, str], None], get_object: Callable[[str, str, str], Awaitable[Any]],
                 services: Callable[[], Sequence[Mapping[str, Any]]], node_allocatable: Callable[[], Mapping[str, str]],
                 wake: Callable[[str], None], metrics: KubeletMetrics | None = None,
                 admit: Callable[[Mapping[str, Any]], str | None] = lambda pod: None) -> None:
        self.runtime = runtime
        #: None to run a new pod, else why it is refused (the eviction manager's admit)
        self.admit = admit
        self.config = config
        self.status = status
        self.volumes = volumes
        self.event_fn = event
        self.get_object = get_object
        self.services = services
        self.node_allocatable = node_allocatable
        self.backoff = Backoff(config.backoff_base, config.backoff_max)
        self.prober = ProbeManager(runtime, on_change=wake, event=event)
        self.runtime_name = runtime.info().name
        self.metrics = metrics or KubeletMetrics()

    def event(self, pod: Mapping[str, Any], kind: str, reason: str, message: str) -> None:
        self.event_fn(pod, kind, reason, message)

    def sandbox_config(self, w: PodWorker) -> PodSandboxConfig:
        meta, spec = w.pod["metadata"], w.pod.get("spec") or {}
        ns = meta.get("namespace", "default")
        declared = [p for c in spec.get("containers") or [] for p in c.get("ports") or []]
        ports = [(p.get("protocol") or "TCP", int(p["containerPort"])) for p in declared]
        mappings = [(p.get("protocol") or "TCP", int(p["containerPort"]), int(p.get("hostPort") or 0), p.get("hostIP") or "")
                    for p in declared if p.get("hostPort")]
        return PodSandboxConfig(
            name=meta["name"], namespace=ns, uid=w.uid, hostname=spec.get("hostname") or meta["name"],
            log_directory=pod_log_directory(self.config.logs_dir, ns, meta["name"], w.uid),
            labels=dict(meta.get("labels") or {}), annotations=dict(meta.get("annotations") or {}),
            host_network=bool(spec.get("hostNetwork")), ports=ports, port_mappings=mappings,
            cgroup_parent=qos.cgroup_parent(qos_class(w.pod), w.uid),
            resources=qos.pod_resources(w.pod, qos_class(w.pod), pids_limit=self.config.pod_pids_limit))

    async def _sandbox(self, w: PodWorker) -> tuple[bool, str]:
        if not w.sandbox_id:
            for sb in await self.runtime.list_pod_sandboxes():
                if sb.uid == w.uid and sb.state is SandboxState.READY:
                    w.sandbox_id = sb.id
        if not w.sandbox_id:
            return False, ""
        try:
            sb = await self.runtime.pod_sandbox_status(w.sandbox_id)
        except NotFoundError:
            w.sandbox_id = ""
            return False, ""
        return sb.state is SandboxState.READY, sb.ip

    async def _containers(self, w: PodWorker) -> list[ContainerStatus]:
        if not w.sandbox_id:
            return []
        return list(await self.runtime.list_containers(w.sandbox_id))

    # -- sync ------------------------------------------------------------------------------

    async def sync_pod(self, w: PodWorker) -> float | None:
        pod, spec = w.pod, w.pod.get("spec") or {}
        now = time.time()
        api_status = pod.get("status") or {}
        if not w.memo.get("seen"):
            w.memo["seen"] = True
            w.memo["first-seen"] = time.monotonic()
            if api_status.get("phase") in ("Succeeded", "Failed"):
                w.terminal_phase = api_status["phase"]
                w.reason, w.message = api_status.get("reason", ""), api_status.get("message", "")
                return None
            w.start_time = api_status.get("startTime") or ts(now)
            refused = self.admit(pod)
            if refused:  # node pressure: upstream's eviction admit handler
                w.terminal_phase, w.reason, w.message = "Failed", "Evicted", refused
                self.event(pod, "Warning", "Evicted", refused)
                return None
            w.initialized = any(c.get("type") == "Initialized" and c.get("status") == "True" for c in api_status.get("conditions") or [])
        wakes: list[float] = []
        deadline = spec.get("activeDeadlineSeconds")
        if deadline is not None:
            left = _parse_ts(w.start_time) + int(deadline) - now
            if left <= 0:
                w.terminal_phase, w.reason = "Failed", "DeadlineExceeded"
                w.message = "Pod was active on the node longer than the specified deadline"
                self.event(pod, "Normal", "DeadlineExceeded", w.message)
                return None
            wakes.append(left)
        ready, pod_ip = await self._sandbox(w)
        latest, _ = _by_name(await self._containers(w))
        actions = compute_pod_actions(pod, sandbox_ready=ready, latest=latest, ever_initialized=w.initialized,
                                      probe_failed=self.prober.failed, is_started=self.prober.started)
        try:
            refresh = actions.create_sandbox or now - w.memo.get("volumes-at", 0.0) >= min(10.0, self.config.sync_frequency)
            if refresh and not self.config.simulated:  # simulated pods have no files to lay out
                w.memo["volume-paths"] = await self.volumes.setup(pod, pod_ip=pod_ip, host_ip=self.config.address)
                w.memo["volumes-at"] = now
        except MountError as err:
            self.event(pod, "Warning", "FailedMount", str(err))
            if actions.create_sandbox:
                self.publish(w, pod_ip, ready)
                return 2.0
        if actions.create_sandbox:
            try:
                # a pod's new sandbox is the next attempt (upstream's kubelet): CRI runtimes reserve each
                # name_namespace_uid_attempt until that sandbox is removed, so a dead one's number cannot be reused
                previous = [sb for sb in await self.runtime.list_pod_sandboxes() if sb.uid == w.uid]
                attempts = [sb.attempt for sb in previous]
                for sb in previous:  # dead ones (none is ready, or there were no sandbox to create): their containers'
                    await self.runtime.stop_pod_sandbox(sb.id)  # names are reserved too, until they are removed
                await self._carry_containers(w, previous)  # stopped: their last runs are over
                for sb in previous:
                    await self.runtime.remove_pod_sandbox(sb.id)
                config = self.sandbox_config(w)
                if attempts:
                    config = replace(config, attempt=max(attempts) + 1)
                w.sandbox_id = await self.runtime.run_pod_sandbox(config)
            except RuntimeErrorStatus as err:
                self.event(pod, "Warning", "FailedCreatePodSandBox", f"Failed to create pod sandbox: {err.message}")
                self.publish(w, "", False)
                return 2.0
            ready, pod_ip = await self._sandbox(w)
        names = {cs.id: cs.name for cs in latest.values()}
        for cid, why in actions.kill.items():
            self.event(pod, "Normal", "Killing", why)
            grace = self.prober.failed_grace(cid)  # a probe's own terminationGracePeriodSeconds wins (upstream)
            await self._stop(w, cid, self._grace(w) if grace is None else grace, self._spec_of(w, names.get(cid, "")))
            if "definition changed" in why:  # a new image restarts at once, not after a back-off
                self.backoff.reset(f"{w.uid}/{names.get(cid, '')}")
        if actions.init_failed:
            self.publish(w, pod_ip, ready, await self._containers(w))
            return None
        specs = {c["name"]: c for c in _all_containers(spec)}
        paths = w.memo.get("volume-paths") or {}
        latest, _ = _by_name(await self._containers(w))
        for name in actions.start_ephemeral:
            delay = await start_container(self, w, specs[name], None, paths, pod_ip)
            if delay is not None:
                wakes.append(delay)
        for name in actions.start_init + actions.start:
            delay = await start_container(self, w, specs[name], latest.get(name), paths, pod_ip)
            if delay is not None:
                wakes.append(delay)
            if name in actions.start_init:
                break  # init containers start one at a time; the PLEG wakes us when it exits
        if actions.initialized and not w.initialized:
            w.initialized = True
        self.publish(w, pod_ip, ready, await self._containers(w))
        st = self.status.status(w.uid) or {}
        if st.get("phase") == "Running" and "started-reported" not in w.memo:
            w.memo["started-reported"] = True
            self.metrics.pod_start.observe(max(0.0, time.monotonic() - w.memo.get("first-seen", time.monotonic())))
        if st.get("phase") in ("Succeeded", "Failed"):
            w.terminal_phase = st["phase"]
        return min(wakes) if wakes else None

    async def _carry_containers(self, w: PodWorker, sandboxes: Sequence[PodSandboxStatus]) -> None:
        """Keep the newest container of each name from the pod's dead sandboxes before they are removed.

        Upstream's kubelet finds them in the pod's status (every sandbox of the pod, until container GC) and
        counts on from their restartCount; here the dead sandboxes go before the new one is made (the runtime
        reserved their names), so what the next attempt and ``lastState`` need is kept in the worker's memo."""
        carried: dict[str, ContainerStatus] = w.memo.setdefault("carried", {})
        for sb in sandboxes:
            try:
                containers = await self.runtime.list_containers(sb.id)
            except NotFoundError:
                continue
            for cs in containers:
                if cs.name not in carried or cs.attempt >= carried[cs.name].attempt:
                    carried[cs.name] = cs

    async def after_start(self, w: PodWorker, c: Mapping[str, Any], cid: str, pod_ip: str) -> None:
        post = ((c.get("lifecycle") or {}).get("postStart"))
        if post:
            why = await run_hook(post, runtime=self.runtime, container_id=cid, container=c, pod_ip=pod_ip, timeout=self._grace(w) or 30)
            if why:
                self.event(w.pod, "Warning", "FailedPostStartHook", f"PostStartHook failed: {why}")
                await self.runtime.stop_container(cid, 0)
                return
        self.prober.start(lambda: w.pod, c, cid, pod_ip, w.uid)

    async def prune(self, w: PodWorker, name: str, keep: set[str]) -> None:
        for cs in await self._containers(w):
            if cs.name == name and cs.id not in keep and cs.state is ContainerState.EXITED:
                self.prober.stop_container(cs.id)
                w.memo.pop(f"termmsg-{cs.id}", None)
                w.memo.pop(f"termlog-{name}-{cs.attempt}", None)
                await self.runtime.remove_container(cs.id)

    @staticmethod
    def _spec_of(w: PodWorker, name: str) -> Mapping[str, Any] | None:
        spec = w.pod.get("spec") or {}
        return next((c for c in _all_containers(spec) if c["name"] == name), None)

    def _grace(self, w: PodWorker) -> float:
        meta, spec = w.pod["metadata"], w.pod.get("spec") or {}
        if "grace-override" in w.memo:  # an eviction's
            return float(w.memo["grace-override"])
        if meta.get("deletionTimestamp") and meta.get("deletionGracePeriodSeconds") is not None:
            return float(meta["deletionGracePeriodSeconds"])
        grace = spec.get("terminationGracePeriodSeconds")
        return float(30 if grace is None else grace)

    async def _stop(self, w: PodWorker, cid: str, grace: float, spec: Mapping[str, Any] | None = None, pod_ip: str = "") -> None:
        started = time.monotonic()
        pre = ((spec or {}).get("lifecycle") or {}).get("preStop")
        if pre and grace > 0:
            try:
                why = await asyncio.wait_for(run_hook(pre, runtime=self.runtime, container_id=cid, container=spec or {}, pod_ip=pod_ip,
                                                      timeout=grace), grace)
            except asyncio.TimeoutError:
                why = f"preStop hook did not finish within the grace period of {grace:g}s"
            except RuntimeErrorStatus as err:
                why = err.message
            if why:
                self.event(w.pod, "Warning", "FailedPreStopHook", f"PreStopHook failed: {why}")
        left = max(0.0, grace - (time.monotonic() - started))
        await self.runtime.stop_container(cid, left if grace > 0 else 0)
        self.prober.stop_container(cid)

    def publish(self, w: PodWorker, pod_ip: str, sandbox_ready: bool, containers: Sequence[ContainerStatus] = ()) -> None:
        init, main, ephemeral = self._views(w, containers)
        if w.terminal_phase:
            for v in init + main + ephemeral:
                if v.latest is not None and v.latest.state is ContainerState.EXITED:
                    v.waiting_reason = v.waiting_message = ""
        status = build_pod_status(PodView(
            pod=w.pod, sandbox_ready=sandbox_ready, pod_ip=pod_ip, host_ip=self.config.address, runtime_name=self.runtime_name,
            init=init, containers=main, ephemeral=ephemeral, terminal_phase=w.terminal_phase, reason=w.reason, message=w.message,
            start_time=w.start_time, initialized=w.initialized, disruption=bool(w.memo.get("disruption-target"))))
        self.status.set_status(w.pod, status)

    def _views(self, w: PodWorker, containers: Sequence[ContainerStatus]
               ) -> tuple[list[ContainerView], list[ContainerView], list[ContainerView]]:
        latest, previous = _by_name(containers)
        spec = w.pod.get("spec") or {}

        carried: Mapping[str, ContainerStatus] = w.memo.get("carried") or {}

        def view(c: Mapping[str, Any]) -> ContainerView:
            cs = self._with_message(w, c, latest.get(c["name"]))
            # the last one in a dead sandbox stands for the previous attempt until this sandbox has one
            prev = self._with_message(w, c, previous.get(c["name"]) or carried.get(c["name"]))
            reason, message = w.waiting.get(c["name"], ("", ""))
            running = cs is not None and cs.state is ContainerState.RUNNING
            return ContainerView(c["name"], c.get("image", ""), cs, prev, reason, message,
                                 ready=running and self.prober.ready(cs.id) and self.prober.started(cs.id) if cs else False,
                                 started=running and self.prober.started(cs.id) if cs else False)
        return ([view(c) for c in spec.get("initContainers") or []], [view(c) for c in spec.get("containers") or []],
                [view(c) for c in spec.get("ephemeralContainers") or []])

    def _with_message(self, w: PodWorker, c: Mapping[str, Any], cs: ContainerStatus | None) -> ContainerStatus | None:
        """terminationMessagePath's content (at most 4096 bytes), or with FallbackToLogsOnError
        and a failure, the log's last 80 lines (at most 2048 bytes), as upstream."""
        if cs is None or cs.state is not ContainerState.EXITED or cs.message:
            return cs
        key = f"termmsg-{cs.id}"
        if key not in w.memo:
            msg = ""
            host = w.memo.get(f"termlog-{c['name']}-{cs.attempt}")
            if host:
                try:
                    with open(host, "rb") as f:
                        msg = f.read(4096).decode("utf-8", "replace")
                except OSError:
                    pass
            if not msg and c.get("terminationMessagePolicy") == "FallbackToLogsOnError" and cs.exit_code != 0 and cs.log_path:
                msg = _log_tail(cs.log_path)
            w.memo[key] = msg
        return replace(cs, message=w.memo[key]) if w.memo[key] else cs

    # -- terminate and clean up -----------------------------------------------------------

    async def terminate_pod(self, w: PodWorker) -> None:
        spec = w.pod.get("spec") or {}
        grace = self._grace(w) if not w.removed else min(self._grace(w), 2.0)
        ready, pod_ip = await self._sandbox(w)
        running = {cs.name: cs for cs in await self._containers(w) if cs.state is ContainerState.RUNNING}
        specs = {c["name"]: c for c in _all_containers(spec)}
        sidecars = [c["name"] for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"]
        deadline = time.monotonic() + grace

        async def stop(name: str) -> None:
            self.event(w.pod, "Normal", "Killing", f"Stopping container {name}")
            await self._stop(w, running[name].id, max(0.0, deadline - time.monotonic()), specs.get(name), pod_ip)

        await asyncio.gather(*(stop(n) for n in running if n not in sidecars))
        for name in reversed(sidecars):
            if name in running:
                await stop(name)
        if w.sandbox_id:
            await self.runtime.stop_pod_sandbox(w.sandbox_id)
        containers = await self._containers(w)
        if not w.terminal_phase:
            main_names = [c["name"] for c in spec.get("containers") or []]
            latest, _ = _by_name(containers)
            codes = [latest[n].exit_code for n in main_names if n in latest and latest[n].state is ContainerState.EXITED]
            w.terminal_phase = "Succeeded" if codes and len(codes) == len(main_names) and all(c == 0 for c in codes) else "Failed"
        if not w.removed:  # a pod gone from the API has no status left to write
            self.publish(w, pod_ip, False, containers)

    def terminated(self, w: PodWorker) -> None:
        self.status.terminated(w.pod)

    async def cleanup_pod(self, w: PodWorker) -> None:
        for cs in await self._containers(w):
            self.prober.stop_container(cs.id)
        if w.sandbox_id:
            await self.runtime.remove_pod_sandbox(w.sandbox_id)
        self.volumes.cleanup(w.uid)
        self.backoff.forget_prefix(w.uid + "/")
        self.status.forget(w.uid)
        logger.info("pod cleaned up", extra={"pod": w.key})
