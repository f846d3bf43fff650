"""Many simulated kubelets in one process (``k8py kubelet --simulated --nodes N``), as kwok.

Each node is real as far as the API server can tell: its own Node object
(registered with fixed capacity: 32 CPUs, 256Gi, ``maxPods``), its own
Lease renewed every 10 s, and its own pod workers and
:class:`~k8py.kubelet.runtime.simulated.SimulatedRuntime`, so its pods go
through the same lifecycle code as on a real node. What is shared, to keep
the API server's load at what N real kubelets would cause or less:

- one pod informer over all *bound* pods (``spec.nodeName!=``, instead of N
  watches of ``spec.nodeName=<node>``), dispatching each pod to the worker
  set of its ``spec.nodeName`` (a pod still being scheduled is no kubelet's
  business: the server sends it as ADDED once bound, which spares a third
  of the pod events at a Deployment's start; managed fields dropped: no
  kubelet reads them, and at 10,000 pods they are tens of megabytes);
- one Node informer over all nodes, keeping of each Node only what the
  status reporter compares (its ``podCIDR`` and its conditions), which the
  reporters read instead of each GETting its Node at every update (at 5,000
  nodes, 170 GETs a second);
- one PLEG (every node's runtime puts its container events on one queue, and
  an event's pod uid finds the node that runs it) and one task group for all
  the nodes' pod workers: no task is a node's own, only each pod's worker;
- one status manager (which deletes a pod being deleted without writing its final status first, as
  kwok, unless the pod has finalizers) and one event broadcaster;
- one HTTP server (/healthz, /metrics) whose port every Node advertises;
- no image list in the Node status (kwok's has none): each node's first pulled
  image would be one more Node write, sent to every Node watcher;
- one heartbeat client for the Leases and the Node status, apart from the
  client of pods and Events, as upstream's kubelet has (its
  ``HeartbeatClient``): when thousands of pods start at once their status
  writes queue for connections, and a Lease renewal stuck behind them (the
  connection pool's wait counts against the connect timeout) fails, and the
  node lifecycle controller marks a live node NotReady and evicts its pods.

An unchanged simulated Node re-posts its status every 10 minutes
(:data:`NODE_STATUS_REPORT_SECONDS`, kwok's node heartbeat) rather than a
kubelet's 5: the Lease is the heartbeat, and at 5,000 nodes the 5-minute
report alone is 17 writes a second.

Start-up registers the nodes at most ``concurrency`` at a time. The Lease
renewals and status checks of all nodes run on one
:class:`~k8py.kubelet.heartbeat_schedule.HeartbeatSchedule` (one task, not two
a node), each at a fixed phase of its period drawn at random, so that they are
spread evenly over the period and stay so when the API server stalls (a loop
per node, sleeping after each renewal, lines up behind a stall and renews in
bursts from then on). The schedule wakes every :data:`HEARTBEAT_TICK` (0.1 s)
and sends the renewals due in it together, 25 at 5,000 nodes: the API server
takes them in one pass and one commit, which at 250 renewals a second cut the
idle cluster's CPU from about half a core to a fifth. Lease renewals are the steady
load of a large simulated cluster (each one a write the API server stores
and sends to every Lease watcher): a node renews every
``node_lease_renew_interval`` (10 s) as a kubelet does, but with more than
2,500 nodes less often, so that all of them renew at most
:data:`MAX_RENEWALS_PER_SECOND` times a second, and never less than twice
per lease duration (at 5,000 nodes and a 40 s lease: every 20 s, which the
node lifecycle controller's 50 s grace period still sees twice).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import Any, Mapping, Sequence

from aiohttp import web
from prometheus_client import CollectorRegistry

from k8py.client.event_recorder import EventBroadcaster
from k8py.client.http1 import Http1Transport
from k8py.client.informer_factory import InformerFactory
from k8py.client.resources import NODES, PODS
from k8py.client.rest import RestClient
from k8py.client.shared_informer import drop_managed_fields
from k8py.kubelet import server, server_tls
from k8py.kubelet.config import KubeletConfig
from k8py.kubelet.heartbeat_schedule import HeartbeatSchedule
from k8py.kubelet.metrics import KubeletMetrics
from k8py.kubelet.node_lease import NodeLease
from k8py.kubelet.node_status import HostReadings, NodeStatusReporter
from k8py.kubelet.pleg import PLEG
from k8py.kubelet.pod_sync import PodSyncer
from k8py.kubelet.pod_workers import PodWorkers
from k8py.kubelet.runtime.protocols import ContainerEvent, ContainerStatus
from k8py.kubelet.runtime.simulated import SimulatedRuntime, SimulationDefaults
from k8py.kubelet.server_context import ServerContext
from k8py.kubelet.status_manager import StatusManager
from k8py.kubelet.volumes.manager import VolumeManager

__all__ = ["SimulatedNodes", "SimulatedNode", "MAX_RENEWALS_PER_SECOND", "NODE_STATUS_REPORT_SECONDS", "SHUTDOWN_GRACE", "HEARTBEAT_CONCURRENCY", "HEARTBEAT_TICK", "STATUS_CONCURRENCY", "lease_renew_interval"]

#: the most Lease renewals a second all simulated nodes together make (see the module docstring)
MAX_RENEWALS_PER_SECOND = 250
#: how often an unchanged simulated Node re-posts its status anyway (kwok's node heartbeat stage:
#: every 10 minutes; a kubelet's default is 5). Changes (a new image, a condition the node
#: lifecycle controller set Unknown) are still written within ``node_status_update_frequency``.
NODE_STATUS_REPORT_SECONDS = 600.0


def lease_renew_interval(configured: float, duration: float, count: int) -> float:
    """How often each of ``count`` simulated nodes renews its Lease."""
    return max(configured, min(count / MAX_RENEWALS_PER_SECOND, duration / 2))

logger = logging.getLogger(__name__)

#: seconds the shared HTTP server lets a request in flight finish when the process stops. It serves
#: no streams (a simulated container has no logs to follow, nothing to exec into): what is in
#: flight is a /healthz or a /metrics, done in milliseconds; aiohttp's default would wait up to
#: 60 s for it, and as long again for its cancellation
SHUTDOWN_GRACE = 0.25

#: heartbeats in flight at once, and the heartbeat client's connections. A renewal waits in the API
#: server as long as every other request does: while 10,000 pods start on a loaded machine, 0.7 s
#: on average (measured), more at times. With 100 in flight that let through 60-80 renewals a
#: second of the 250 that 5,000 nodes need — each node renewing every 60-80 s, past the node
#: lifecycle controller's 50 s grace: 137 live nodes went NotReady, their pods unready. 256 keep
#: 250 a second through 1 s of latency and every node inside its grace through 2 s (upstream
#: gives node heartbeats their own APF priority level; here they are simply more of the requests
#: the server is working on)
HEARTBEAT_CONCURRENCY = 256

#: the heartbeat schedule's tick: the renewals and status checks that fall due within it run together
#: (:mod:`~k8py.kubelet.heartbeat_schedule`); each node's still every period, at most this late
HEARTBEAT_TICK = 0.1

#: pod status writes in flight at once, all nodes together, on a client of their own (the pods'
#: informer and Events keep theirs). They are the last step of a pod's start: with 32 in flight
#: and the API server answering in 2 s (5,000 nodes, 10,000 pods, a loaded machine) 16 pods a
#: second got their Running status while the scheduler bound 35 — the slowest step, with a queue
#: of bound pods behind it. 5,000 kubelets would have 16 each; 128 keep the step level with the
#: others (more would only take the server from the creates and binds ahead of it)
STATUS_CONCURRENCY = 128

_HOST = HostReadings(cpus=32, memory_bytes=256 * 1024**3, memory_available=200 * 1024**3, disk_bytes=1024**4,
                     disk_available=900 * 1024**3, pids_used=100, pid_max=4_194_304, kernel="simulated", os_image="k8py simulated node",
                     boot_id="simulated", machine_id="simulated")


def node_summary(node: Any) -> Any:
    """What the status reporter reads of a Node (see the module docstring)."""
    if not isinstance(node, dict):
        return node  # a tombstone
    meta = node.get("metadata") or {}
    conditions = ((node.get("status") or {}).get("conditions")) or []
    return {
        "metadata": {k: meta[k] for k in ("name", "uid", "resourceVersion") if k in meta},
        "spec": {"podCIDR": (node.get("spec") or {}).get("podCIDR", "")},
        "status": {"conditions": [{k: c[k] for k in ("type", "status", "lastTransitionTime") if k in c} for c in conditions]},
    }


def _fallback_pod_cidr(index: int) -> str:
    """A node's own /24 when node IPAM gives it none: inside 127.128.0.0/10,
    between the cluster CIDR (127.64.0.0/10) and the Service range
    (127.192.0.0/12), so a simulated pod's IP is a loopback address that
    nothing listens on — a proxy that picks one gets a local refusal, and no
    packet ever leaves the machine."""
    return f"127.{128 + (index // 256) % 64}.{index % 256}.0/24"


class SimulatedNode:
    def __init__(self, parent: "SimulatedNodes", index: int) -> None:
        base = parent.config
        self.config = replace(base, node_name=f"{base.node_name}-{index}", simulated=True, node_labels=dict(base.node_labels),
                              node_status_update_frequency=max(base.node_status_update_frequency, 30.0),
                              node_status_report_frequency=max(base.node_status_report_frequency, NODE_STATUS_REPORT_SECONDS),
                              pod_cidr=_fallback_pod_cidr(index))
        self.runtime = SimulatedRuntime(parent.defaults, node_ip=base.address, events=parent.container_events)
        self.syncer = PodSyncer(runtime=self.runtime, config=self.config, status=parent.status,
                                volumes=VolumeManager(self.config.pods_dir, get=parent.no_object, node_alloc=dict),
                                event=parent.event, get_object=parent.no_object, services=lambda: [], node_allocatable=dict,
                                wake=self._wake, metrics=parent.metrics)
        self.workers = PodWorkers(self.syncer)
        self.lease = NodeLease(parent.heartbeat, self.config.node_name, duration=base.node_lease_duration_seconds,
                               interval=parent.lease_interval, node_uid=self._node_uid)
        self.status = NodeStatusReporter(parent.heartbeat, self.config, runtime_version="k8py-simulated://0.1.0", port=0,
                                         host=lambda: _HOST, images=self._images, on_pod_cidr=self._on_pod_cidr,
                                         cached_node=lambda: parent.node_informer.lister.try_get(None, self.config.node_name))
        #: the Node's uid, for the Lease's owner reference (the created Node itself is not kept: at 5,000
        #: nodes, 5,000 full Node objects that nothing reads)
        self.uid = ""

    def _wake(self, uid: str) -> None:
        self.workers.wake(uid)

    async def _node_uid(self) -> str:
        return self.uid

    async def _images(self) -> list[Any]:
        """None reported, as kwok's Node status has none: the list changes when a node's first
        pod pulls its image, and each change is a Node status write that every Node watcher
        (scheduler, controller manager, these nodes' own informer) is sent — 5,000 of them,
        half a write a pod, while 10,000 pods start on 5,000 nodes."""
        return []

    async def _on_pod_cidr(self, cidr: str) -> None:
        await self.runtime.update_runtime_config(pod_cidr=cidr)

    async def register(self, port: int) -> None:
        self.status.port = port
        self.uid = str(((await self.status.register()).get("metadata") or {}).get("uid", ""))
        self.lease.create_first = self.status.created
        if not self.status.pod_cidr:
            await self.runtime.update_runtime_config(pod_cidr=self.config.pod_cidr)

    def lease_heartbeat(self, schedule: HeartbeatSchedule) -> None:
        """The Lease renewal on the shared schedule, at a phase of its own: added as soon as the Node is
        registered (the node lifecycle controller's grace runs from when it first sees the Node; waiting
        for the other 4,999 to register took longer than that on a loaded machine)."""
        schedule.add(f"lease-{self.config.node_name}", self.lease.interval, self.lease.beat)

    def status_heartbeat(self, schedule: HeartbeatSchedule) -> None:
        """The status check on the shared schedule (once the Node informer has synced: it reads it)."""
        schedule.add(f"node-status-{self.config.node_name}", self.config.node_status_update_frequency, self.status.beat)



class SimulatedNodes:
    def __init__(self, client: RestClient, config: KubeletConfig, *, count: int, concurrency: int = 32,
                 defaults: SimulationDefaults | None = None) -> None:
        self.defaults = defaults or SimulationDefaults()
        self.client = client
        #: Leases and Node status (see the module docstring); closed by :meth:`run`
        self.heartbeat = RestClient(client.config, transport=Http1Transport(client.config, pool_size=HEARTBEAT_CONCURRENCY))
        self.config = config
        self.count = count
        self.concurrency = concurrency
        self.registry = CollectorRegistry()
        self.metrics = KubeletMetrics(self.registry)
        self.broadcaster = EventBroadcaster(client)
        self.recorder = self.broadcaster.new_recorder("kubelet", host=config.node_name)
        #: the pods' status writes (and a deleted pod's final delete), on connections of their own: see STATUS_CONCURRENCY
        self.status_client = RestClient(client.config, transport=Http1Transport(client.config, pool_size=STATUS_CONCURRENCY))
        self.status = StatusManager(self.status_client, concurrency=max(config.status_concurrency, STATUS_CONCURRENCY),
                                    final_status_when_deleted=False)
        self.informers = InformerFactory(client, transform=drop_managed_fields)
        self.pod_informer = self.informers.informer(PODS, field_selector="spec.nodeName!=")
        self.node_informers = InformerFactory(client, transform=node_summary)
        self.node_informer = self.node_informers.informer(NODES)
        self.lease_interval = lease_renew_interval(config.node_lease_renew_interval, config.node_lease_duration_seconds, count)
        self.schedule = HeartbeatSchedule(concurrency=HEARTBEAT_CONCURRENCY, tick=HEARTBEAT_TICK)
        #: every node's runtime puts its container events here, for the one PLEG of all nodes
        self.container_events: asyncio.Queue[ContainerEvent] = asyncio.Queue()  # unbounded: one item per change, drained at once
        #: pod uid -> the node whose worker has it (the PLEG's events carry only the uid)
        self._pod_nodes: dict[str, SimulatedNode] = {}
        self.nodes = [SimulatedNode(self, i) for i in range(count)]
        self.pleg = PLEG(self.nodes[0].runtime if self.nodes else SimulatedRuntime(events=self.container_events),
                         wake=self._wake_pod, all_pods=self._pod_uids, relist_period=300)
        self._by_name = {n.config.node_name: n for n in self.nodes}
        self.ready = asyncio.Event()
        self.port = 0

    def event(self, obj: Mapping[str, Any], kind: str, reason: str, message: str) -> None:
        self.recorder.event(obj, kind, reason, message, resource=PODS)

    async def no_object(self, kind: str, namespace: str, name: str) -> None:
        return None

    def _wake_pod(self, uid: str) -> None:
        n = self._pod_nodes.get(uid)
        if n is not None:
            if uid in n.workers.workers:
                n.workers.wake(uid)
            else:
                del self._pod_nodes[uid]  # its worker is gone

    def _pod_uids(self) -> list[str]:
        """Every pod with a worker (the PLEG's relist), forgetting those whose worker is gone."""
        for uid in [u for u, n in self._pod_nodes.items() if u not in n.workers.workers]:
            del self._pod_nodes[uid]
        return list(self._pod_nodes)

    def _node_of(self, pod: Mapping[str, Any]) -> SimulatedNode | None:
        return self._by_name.get(((pod.get("spec") or {}).get("nodeName")) or "")

    # PodContainers for the shared server
    def pods(self) -> Sequence[Mapping[str, Any]]:
        return [w.pod for n in self.nodes for w in n.workers.workers.values()]

    def sandbox_id(self, namespace: str, name: str) -> str | None:
        return None

    async def containers(self, namespace: str, name: str) -> Sequence[ContainerStatus]:
        return []

    async def run(self) -> None:
        ctx = ServerContext(node_name=self.config.node_name, runtime=self.nodes[0].runtime, pods=self, registry=self.registry,
                            healthy=self.ready.is_set)
        ssl_context, middlewares = server_tls.serving_options(self.config, self.client)
        runner = web.AppRunner(server.build_app(ctx, middlewares=middlewares), access_log=None, shutdown_timeout=SHUTDOWN_GRACE)
        await runner.setup()
        await web.TCPSite(runner, self.config.address, self.config.port, ssl_context=ssl_context).start()
        self.port = runner.addresses[0][1]
        try:
            limit = asyncio.Semaphore(self.concurrency)

            async def register(n: SimulatedNode) -> None:
                async with limit:
                    await n.register(self.port)
                n.lease_heartbeat(self.schedule)

            def on_pod(pod: dict[str, Any]) -> None:
                n = self._node_of(pod)
                if n is not None:
                    n.workers.update_pod(pod)
                    self._pod_nodes[pod["metadata"]["uid"]] = n

            def on_delete(obj: Any) -> None:
                pod = getattr(obj, "obj", obj)
                n = self._node_of(pod) if isinstance(pod, dict) else None
                if n is not None:
                    n.workers.remove_pod(pod)

            self.pod_informer.add_event_handler(on_add=on_pod, on_update=lambda _o, p: on_pod(p), on_delete=on_delete)
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self.schedule.run(), name="simulated-heartbeats")
                await asyncio.gather(*(register(n) for n in self.nodes))
                tg.create_task(self.broadcaster.run(), name="simulated-events")
                tg.create_task(self.status.run(), name="simulated-status-manager")
                tg.create_task(self.pleg.run(), name="simulated-pleg")
                self.informers.start()
                self.node_informers.start()
                await self.informers.wait_for_cache_sync()
                await self.node_informers.wait_for_cache_sync()
                for n in self.nodes:
                    n.workers.attach(tg)  # each pod's worker a task of this group: no task a node
                    n.status_heartbeat(self.schedule)
                self.ready.set()
                logger.info("simulated nodes running", extra={"nodes": self.count})
        finally:
            await self.informers.shutdown()
            await self.node_informers.shutdown()
            await runner.cleanup()
            await self.heartbeat.close()
            await self.status_client.close()
