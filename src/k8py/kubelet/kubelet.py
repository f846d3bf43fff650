"""The Kubelet: wires the rooms together and runs them (see the package docstring).

Start-up order, each step before the next:

1. the runtime loads its state and adopts the containers still running;
2. the HTTP server (``server.build_app``) listens, so its port can be
   registered as ``daemonEndpoints.kubeletEndpoint.port``;
3. the Node is registered; the runtime gets the pod CIDR — the Node's
   ``spec.podCIDR`` if node IPAM set one, else ``--pod-cidr`` (logged);
4. the pod informer (``fieldSelector=spec.nodeName=<node>``) syncs;
   sandboxes of pods that no longer exist are stopped and removed (the
   runtime only ever knows containers this kubelet started);
5. pod workers, PLEG, status manager, node status, Lease, the eviction
   manager and the event broadcaster run until cancelled.

Shutdown (cancellation, the CLI's SIGTERM) undoes it in reverse, the HTTP
server first: the streams it serves (``logs -f``, exec, attach,
port-forward) never end on their own, so they are cut after
:data:`STREAM_SHUTDOWN_GRACE` instead of aiohttp's 60 s wait for each
(which held a SIGTERM'd kubelet for a minute while one ``kubectl
port-forward`` was open). An exec'd command ends with its stream; the
containers keep running for the next kubelet on this root dir to adopt.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any, Mapping, Sequence

from aiohttp import web

from k8py.api.errors import NotFound
from k8py.client.event_recorder import EventBroadcaster
from k8py.client.informer_factory import InformerFactory
from k8py.client.resources import CONFIGMAPS, NODES, PODS, SECRETS, SERVICE_ACCOUNTS, SERVICES
from k8py.client.rest import RestClient
from k8py.kubelet import server, server_tls
from k8py.kubelet.certificate_rotation import ClientCertificateRotation
from k8py.kubelet.config import KubeletConfig
from k8py.kubelet.metrics import KubeletMetrics
from k8py.kubelet.node_lease import NodeLease
from k8py.kubelet.node_status import NodeStatusReporter, read_host
from k8py.kubelet.pleg import PLEG
from k8py.kubelet.pod_sync import PodSyncer
from k8py.kubelet.eviction.manager import EvictionManager
from k8py.kubelet.eviction import local_storage
from k8py.kubelet.eviction.node_reclaim import reclaim_disk
from k8py.kubelet.eviction.pod_usage import measure
from k8py.kubelet.eviction.ranking import PodUsage
from k8py.kubelet.eviction.signals import observe
from k8py.kubelet.eviction.thresholds import configured_thresholds
from k8py.kubelet.pod_workers import PodWorkers, WorkState
from k8py.kubelet.runtime.protocols import ContainerState, ContainerStatus, HealthRuntime, Image, ImageFilesystemRuntime, Runtime
from k8py.kubelet.server_context import ServerContext
from k8py.kubelet.static_pods import StaticPods, is_mirror_pod
from k8py.kubelet.status_manager import StatusManager
from k8py.kubelet.token_manager import TokenManager
from k8py.kubelet.volumes.manager import VolumeManager

__all__ = ["Kubelet", "STREAM_SHUTDOWN_GRACE"]

logger = logging.getLogger(__name__)

#: seconds a stopping kubelet lets in-flight requests finish before it cancels them
#: (aiohttp waits this long for the handlers, then as long again for their cancellation)
STREAM_SHUTDOWN_GRACE = 1.0


class Kubelet:
    def __init__(self, client: RestClient, config: KubeletConfig, runtime: Runtime) -> None:
        self.client = client
        self.config = config
        self.runtime = runtime
        self.metrics = KubeletMetrics()
        self.registry = self.metrics.registry
        self._running_containers = 0
        self.metrics.bind(running_pods=lambda: sum(1 for w in self.workers.workers.values() if w.sandbox_id and not w.terminal_phase),
                          running_containers=lambda: self._running_containers)
        self.broadcaster = EventBroadcaster(client)
        self.recorder = self.broadcaster.new_recorder("kubelet", host=config.node_name)
        self.informers = InformerFactory(client)
        self.pod_informer = self.informers.informer(PODS, field_selector=f"spec.nodeName={config.node_name}")
        self.service_informer = self.informers.informer(SERVICES)
        self.status = StatusManager(client, concurrency=config.status_concurrency)
        self._node: dict[str, Any] = {}
        self.tokens = TokenManager(self._request_token)
        self.volumes = VolumeManager(config.pods_dir, get=self.get_object, node_alloc=self.node_allocatable, tokens=self.tokens)
        self.syncer = PodSyncer(runtime=runtime, config=config, status=self.status, volumes=self.volumes, event=self.event,
                                get_object=self.get_object, services=lambda: self.service_informer.lister.list(),
                                node_allocatable=self.node_allocatable, wake=self._wake, metrics=self.metrics)
        self.eviction = None if config.simulated else self._eviction_manager()
        if self.eviction is not None:
            self.syncer.admit = self.eviction.admit
        self.workers = PodWorkers(self.syncer)
        self.pleg = PLEG(runtime, wake=self._wake, all_pods=lambda: list(self.workers.workers), relist_period=config.sync_frequency,
                         on_event=self.metrics.pleg_events.inc)
        self.lease = NodeLease(client, config.node_name, duration=config.node_lease_duration_seconds,
                               interval=config.node_lease_renew_interval, node_uid=self._node_uid)
        self.port = config.port
        self.node_status: NodeStatusReporter | None = None
        self.static_pods = StaticPods(client, config, on_pod=self.workers.update_pod, on_remove=self.workers.remove_pod)
        self.ready = asyncio.Event()
        self._runner: web.AppRunner | None = None

    # -- small services the rooms are given -------------------------------------------------

    def event(self, obj: Mapping[str, Any], kind: str, reason: str, message: str) -> None:
        self.recorder.event(obj, kind, reason, message, resource=PODS)

    def _wake(self, uid: str) -> None:
        self.workers.wake(uid)

    async def get_object(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return await self.client.get(CONFIGMAPS if kind == "configmap" else SECRETS, namespace, name)
        except NotFound:
            return None

    async def _request_token(self, namespace: str, service_account: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self.client.create(SERVICE_ACCOUNTS, body, namespace=namespace, name=service_account, subresource="token")

    def node_allocatable(self) -> Mapping[str, str]:
        return ((self._node.get("status") or {}).get("allocatable")) or {}

    async def _node_uid(self) -> str:
        return str((self._node.get("metadata") or {}).get("uid", ""))

    async def _images(self) -> list[Image]:
        return list(await self.runtime.list_images())

    async def _on_pod_cidr(self, cidr: str) -> None:
        logger.info("pod CIDR from the node", extra={"node": self.config.node_name, "podCIDR": cidr})
        await self.runtime.update_runtime_config(pod_cidr=cidr)

    # -- node-pressure eviction ----------------------------------------------------------------

    def _image_fs(self) -> str:
        """Where the node's images are: the runtime's own filesystem when it says (containerd), else the kubelet's store."""
        if isinstance(self.runtime, ImageFilesystemRuntime) and self.runtime.image_fs_path:
            return self.runtime.image_fs_path
        return self.config.images_dir

    def _eviction_manager(self) -> EvictionManager:
        cfg = self.config
        node_ref = {"kind": "Node", "apiVersion": "v1", "metadata": {"name": cfg.node_name, "uid": cfg.node_name}}
        return EvictionManager(
            configured_thresholds(cfg.eviction_hard, cfg.eviction_soft, cfg.eviction_soft_grace_period, cfg.eviction_minimum_reclaim),
            observe=lambda: observe(cfg.root_dir, self._image_fs()), pods=self._evictable, usage=self._pod_usage, evict=self._evict,
            node_event=lambda kind, reason, msg: self.recorder.event(node_ref, kind, reason, msg, resource=NODES),
            interval=cfg.housekeeping_interval, pressure_transition_period=cfg.eviction_pressure_transition_period,
            max_pod_grace_period=cfg.eviction_max_pod_grace_period, local_storage=self._over_local_storage,
            reclaim_disk=lambda: reclaim_disk(self.runtime, active=self._running_uids))

    def _running_uids(self) -> set[str]:
        """The pods whose containers the kubelet still needs (the rest are dead weight to node reclaim)."""
        return {uid for uid, w in self.workers.workers.items() if w.state is not WorkState.TERMINATED}

    async def _over_local_storage(self) -> list[tuple[Mapping[str, Any], str]]:
        out = []
        for pod in self._evictable():
            uid = pod["metadata"]["uid"]
            w = self.workers.workers.get(uid)
            if w is None or not local_storage.has_limits(pod):  # most pods: nothing to measure
                continue
            message = local_storage.violation(pod, await local_storage.measure(self.runtime, pod, w.sandbox_id,
                                                                               pod_dir=self.volumes.pod_dir(uid)))
            if message:
                out.append((pod, message))
        return out

    async def _run_eviction(self, manager: EvictionManager, first_sync_limit: float = 30.0) -> None:
        """Start evicting once the pods found at start-up have synced once (or ``first_sync_limit``
        passed): ranking a node whose adopted pods are not all known yet would pick the wrong one."""
        deadline = time.monotonic() + first_sync_limit
        while time.monotonic() < deadline and any(not w.sandbox_id and not w.terminal_phase and not w.removed
                                                  for w in list(self.workers.workers.values())):
            await asyncio.sleep(0.1)
        await manager.run()

    def _evictable(self) -> list[dict[str, Any]]:
        return [w.pod for w in self.workers.workers.values() if w.state is WorkState.SYNCING and not w.terminal_phase and w.sandbox_id
                and not w.pod["metadata"].get("deletionTimestamp")]

    async def _pod_usage(self, pods: Sequence[Mapping[str, Any]]) -> Mapping[str, PodUsage]:
        pairs = [(p, self.workers.workers[p["metadata"]["uid"]].sandbox_id) for p in pods if p["metadata"]["uid"] in self.workers.workers]
        return await measure(self.runtime, pairs, pods_dir=self.config.pods_dir, logs_dir=self.config.logs_dir)

    async def _evict(self, pod: Mapping[str, Any], message: str, grace: float, *, disruption: bool = True) -> None:
        """Fail the pod with reason Evicted, kill it with ``grace``, and return once it is terminated."""
        w = self.workers.workers.get(pod["metadata"]["uid"])
        if w is None:
            return
        w.terminal_phase, w.reason, w.message = "Failed", "Evicted", message
        w.memo["grace-override"] = grace
        w.memo["disruption-target"] = disruption
        self.event(w.pod, "Warning", "Evicted", message)
        w.wake()
        while w.state is not WorkState.TERMINATED and w.uid in self.workers.workers:
            await asyncio.sleep(0.05)

    # -- what the HTTP server sees ----------------------------------------------------------

    def pods(self) -> Sequence[Mapping[str, Any]]:
        return [w.pod for w in self.workers.workers.values()]

    def sandbox_id(self, namespace: str, name: str) -> str | None:
        for w in self.workers.workers.values():
            m = w.pod["metadata"]
            if m["name"] == name and m.get("namespace", "default") == namespace:
                return w.sandbox_id or None
        return None

    async def containers(self, namespace: str, name: str) -> Sequence[ContainerStatus]:
        sid = self.sandbox_id(namespace, name)
        if not sid:
            return []
        return sorted(await self.runtime.list_containers(sid), key=lambda c: (c.name, c.attempt))

    # -- run ----------------------------------------------------------------------------------

    async def _serve(self) -> None:
        ctx = ServerContext(node_name=self.config.node_name, runtime=self.runtime, pods=self, registry=self.registry,
                            filesystems=lambda: (self.config.root_dir, self._image_fs()),
                            healthy=lambda: self.ready.is_set())
        #: the cluster-issued serving certificate (serverTLSBootstrap), renewed in run()
        self.serving_certificate = server_tls.serving_certificate(self.config, self.client)
        ssl_context, middlewares = server_tls.serving_options(self.config, self.client, serving=self.serving_certificate)
        self._runner = web.AppRunner(server.build_app(ctx, middlewares=middlewares), access_log=None,
                                     shutdown_timeout=STREAM_SHUTDOWN_GRACE)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.config.address, self.config.port, ssl_context=ssl_context)
        await site.start()
        self.port = self._runner.addresses[0][1]

    def _add_handlers(self) -> None:
        def on_delete(obj: Any) -> None:
            pod = getattr(obj, "obj", obj)
            if isinstance(pod, dict) and not is_mirror_pod(pod):
                self.workers.remove_pod(pod)

        def on_pod(pod: dict[str, Any]) -> None:
            if not is_mirror_pod(pod):  # a static pod's source is its file, not the API
                self.workers.update_pod(pod)

        self.pod_informer.add_event_handler(on_add=on_pod, on_update=lambda _o, n: on_pod(n), on_delete=on_delete)

    async def _remove_orphans(self) -> None:
        known = {p["metadata"]["uid"] for p in self.pod_informer.lister.list()} | set(self.workers.workers)
        for sb in await self.runtime.list_pod_sandboxes():
            if sb.uid not in known:
                logger.info("removing the sandbox of a pod that no longer exists", extra={"pod": f"{sb.namespace}/{sb.name}"})
                await self.runtime.remove_pod_sandbox(sb.id)

    async def run(self) -> None:
        start = getattr(self.runtime, "start", None)
        if start is not None:
            await start()
        await self._serve()
        try:
            info = self.runtime.info()
            self.node_status = NodeStatusReporter(
                self.client, self.config, runtime_version=f"{info.name}://{info.version}", port=self.port,
                host=lambda: read_host(self.config.root_dir), images=self._images, on_pod_cidr=self._on_pod_cidr,
                pressure=self.eviction.conditions if self.eviction is not None else None,
                runtime_errors=self.runtime.health_errors if isinstance(self.runtime, HealthRuntime) else None)
            self._node = await self.node_status.register()
            node_ref = {"kind": "Node", "apiVersion": "v1", "metadata": {"name": self.config.node_name, "uid": self.config.node_name}}
            self.recorder.event(node_ref, "Normal", "Starting", "Starting kubelet.", resource=NODES)
            self.recorder.event(node_ref, "Normal", "NodeReady", f"Node {self.config.node_name} status is now: NodeReady", resource=NODES)
            await self._wait_for_pod_cidr()
            if not self.node_status.pod_cidr:
                logger.warning("node has no spec.podCIDR (node IPAM not running?): using --pod-cidr",
                               extra={"node": self.config.node_name, "podCIDR": self.config.pod_cidr})
                await self.runtime.update_runtime_config(pod_cidr=self.config.pod_cidr)
            self._add_handlers()
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self.broadcaster.run(), name="kubelet-events")
                self.informers.start()
                await self.informers.wait_for_cache_sync()
                await self._remove_orphans()
                tg.create_task(self.workers.run(), name="pod-workers")
                tg.create_task(self.pleg.run(), name="pleg")
                tg.create_task(self.status.run(), name="status-manager")
                tg.create_task(self.node_status.run(), name="node-status")
                tg.create_task(self.lease.run(), name="node-lease")
                tg.create_task(self._refresh_node(), name="node-cache")
                if self.eviction is not None:
                    tg.create_task(self._run_eviction(self.eviction), name="eviction-manager")
                if self.config.static_pod_path:
                    tg.create_task(self.static_pods.run(), name="static-pods")
                if self.config.rotate_certificates:
                    tg.create_task(ClientCertificateRotation(
                        self.client, node_name=self.config.node_name,
                        cert_dir=self.config.cert_dir or os.path.join(self.config.root_dir, "pki")).run(),
                        name="client-certificate-rotation")
                if self.serving_certificate is not None:
                    tg.create_task(self.serving_certificate.run(), name="serving-certificate-rotation")
                self.ready.set()
                logger.info("kubelet running", extra={"node": self.config.node_name, "port": self.port})
        finally:
            if self._runner is not None:  # first: its streams read the runtime, which closes below
                await self._runner.cleanup()
            await self.syncer.prober.close()
            await self.informers.shutdown()
            close = getattr(self.runtime, "close", None)
            if close is not None:
                await close()

    async def _wait_for_pod_cidr(self) -> None:
        """Give node IPAM up to ``pod_cidr_wait`` seconds to set spec.podCIDR."""
        assert self.node_status is not None
        deadline = time.monotonic() + self.config.pod_cidr_wait
        while not self.node_status.pod_cidr and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            node = await self.client.get(NODES, None, self.config.node_name)
            cidr = (node.get("spec") or {}).get("podCIDR") or ""
            if cidr:
                await self.node_status.update(node=node)  # adopts the range (on_pod_cidr)

    async def _refresh_node(self) -> None:
        while True:
            await asyncio.sleep(self.config.node_status_update_frequency)
            try:
                self._node = await self.client.get(NODES, None, self.config.node_name)
            except asyncio.CancelledError:
                raise
            except Exception:
                continue
            self._running_containers = sum(1 for c in await self.runtime.list_containers() if c.state is ContainerState.RUNNING)
