"""Node lifecycle (``nodelifecycle``): notice nodes that stop reporting (upstream
``pkg/controller/nodelifecycle``, component ``node-controller``).

Every ``node_monitor_period`` seconds for every node, and at once for a node
that changes (only that one: a pass over all nodes at each node's status
write would be O(nodes²), at 5,000 nodes the controller manager's whole CPU):

- **Health.** A node's heartbeat is its ``kube-node-lease`` Lease ``renewTime``
  or its Ready condition's ``lastHeartbeatTime``; the controller notes, on its
  own monotonic clock, when it last saw either move (upstream's
  ``probeTimestamp``, so skew between hosts does not matter). A node silent for
  longer than ``node_monitor_grace_period`` (``node_startup_grace_period`` if it
  never posted Ready) has Ready, MemoryPressure, DiskPressure and PIDPressure
  set to ``Unknown``: reason ``NodeStatusUnknown``, message "Kubelet stopped
  posting node status." (``NodeStatusNeverUpdated`` / "Kubelet never posted
  node status." for a condition never posted).
- **Pods.** When a node's Ready turns from True to anything else, and on every
  pass while it is Unknown, the Ready condition of its pods is set False (no
  kubelet will), with a ``NodeNotReady`` Event; the node gets a
  ``NodeNotReady`` Event too.
- **Taints.** ``NoSchedule`` taints follow the conditions (``not-ready`` for
  Ready=False, ``unreachable`` for Unknown, the pressure taints) and
  ``spec.unschedulable`` (``node.kubernetes.io/unschedulable``, so
  ``kubectl cordon`` is visible as upstream shows it); ``NoExecute``
  ``not-ready``/``unreachable`` taints follow Ready, with ``timeAdded``. Only
  these keys are touched: taints written by users (``kubectl taint``) stay.
  The taint-eviction controller acts on the ``NoExecute`` ones.

A node that comes back (its kubelet posts Ready=True again) loses the taints on
the next pass. The nodes of a pass are looked at by :data:`NODE_UPDATE_WORKERS`
workers at once (most need no write; those that do wait on the API server). Writes carry the node's resourceVersion; a conflict just waits
for the next pass.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from k8py.api.errors import Conflict, NotFound, StatusError
from k8py.client.resources import LEASES, NODES, PODS
from k8py.client.rest import PatchType
from k8py.controllers.context import ControllerContext
from k8py.controllers.node_pods import ensure_node_name_index, pods_on_node
from k8py.controllers.node_taints import CONDITION_TAINTS, NOT_READY, UNREACHABLE, UNSCHEDULABLE
from k8py.controllers.pod_status import format_time

__all__ = ["NodeLifecycleController", "new_controller", "LEASE_NAMESPACE"]

logger = logging.getLogger(__name__)

LEASE_NAMESPACE = "kube-node-lease"
HEALTH_CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
OWNED_NO_SCHEDULE = frozenset(CONDITION_TAINTS.values()) | {UNSCHEDULABLE}
#: nodes whose writes are in flight at once (upstream's nodeUpdateWorkerSize is 8; a write here takes
#: longer). One at a time, 5,000 new nodes' not-ready taints came off at one per request latency —
#: 60 to 90 a second, for over a minute, while the scheduler could place no pod on them
NODE_UPDATE_WORKERS = 16


@dataclass
class _Health:
    probe: float
    heartbeat: str | None
    renew: str | None
    ready: str | None
    #: the Node resourceVersion whose taints were last found as they should be: the taints
    #: follow from the Node alone, so an unchanged Node needs no recomputation (a pass looks
    #: at every node every 5 s, and at 5,000 nodes most have not changed)
    taints_checked: str | None = None
    #: (resourceVersion, what :meth:`NodeLifecycleController._ready_view` read of that version)
    view: tuple[str, tuple[bool, str | None, str | None]] | None = None


def _conditions(node: Any) -> dict[str, dict[str, Any]]:
    return {c.get("type"): c for c in (node.get("status") or {}).get("conditions") or () if isinstance(c, dict)}


def desired_taints(node: Any, now: str) -> list[dict[str, Any]]:
    """The node's taints with the controller-owned ones recomputed (others kept, in order)."""
    conds = _conditions(node)
    taints = [t for t in (node.get("spec") or {}).get("taints") or () if isinstance(t, dict)]
    want_ns = {key for (ctype, status), key in CONDITION_TAINTS.items() if (conds.get(ctype) or {}).get("status") == status}
    if (node.get("spec") or {}).get("unschedulable"):
        want_ns.add(UNSCHEDULABLE)
    ready = (conds.get("Ready") or {}).get("status")
    want_ne = {"False": NOT_READY, "Unknown": UNREACHABLE}.get(ready or "")
    kept = []
    for t in taints:
        key, effect = t.get("key"), t.get("effect")
        if effect == "NoSchedule" and key in OWNED_NO_SCHEDULE:
            if key in want_ns:
                kept.append(t)
                want_ns.discard(key)
        elif effect == "NoExecute" and key in (NOT_READY, UNREACHABLE):
            if key == want_ne:
                kept.append(t)
                want_ne = None
        else:
            kept.append(t)
    kept.extend({"key": key, "effect": "NoSchedule"} for key in sorted(want_ns))
    if want_ne:
        kept.append({"key": want_ne, "effect": "NoExecute", "timeAdded": now})
    return kept


class NodeLifecycleController:
    def __init__(self, ctx: ControllerContext) -> None:
        self.name = "nodelifecycle"
        self.ctx = ctx
        self.client = ctx.client
        self.clock = ctx.clock
        self.options = ctx.options
        self.recorder = ctx.recorder("node-controller")
        self.nodes = ctx.informers.informer(NODES)
        self.leases = ctx.informers.informer(LEASES)
        self.pods = ctx.informers.informer(PODS)
        ensure_node_name_index(self.pods)
        self._health: dict[str, _Health] = {}
        self._wake = asyncio.Event()
        self._changed: set[str] = set()  # nodes to look at before the next full pass
        self.nodes.add_event_handler(on_add=self._node_changed, on_update=lambda o, n: self._node_changed(n),
                                     on_delete=self._node_deleted)

    def _node_changed(self, node: Any) -> None:
        name = (node.get("metadata") or {}).get("name")
        if name:
            self._changed.add(name)
            self._wake.set()

    def _node_deleted(self, obj: Any) -> None:
        """Forget a deleted node's health (a pass no longer compares every node's name with the
        health table: at 5,000 nodes, a set of 5,000 names every 5 s)."""
        node = getattr(obj, "obj", obj)
        name = ((node.get("metadata") or {}).get("name")) if isinstance(node, dict) else None
        if name:
            self._health.pop(name, None)

    async def run(self) -> None:
        for informer in (self.nodes, self.leases, self.pods):
            await informer.wait_for_cache_sync()
        next_pass = self.clock.monotonic()
        while True:
            self._wake.clear()
            names: set[str] | None = None
            if self.clock.monotonic() < next_pass:
                names = self._changed
            else:
                next_pass = self.clock.monotonic() + self.options.node_monitor_period
            self._changed = set()
            try:
                await self.monitor(names)
            except StatusError as err:
                logger.warning("node health pass failed", extra={"error": str(err)})
            await self._sleep(max(0.0, next_pass - self.clock.monotonic()))

    async def _sleep(self, seconds: float) -> None:
        sleeper = asyncio.ensure_future(self.clock.sleep(seconds))
        waker = asyncio.ensure_future(self._wake.wait())
        sleeper.set_name("nodelifecycle-period")
        waker.set_name("nodelifecycle-wake")
        try:
            await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
            waker.cancel()

    async def monitor(self, names: set[str] | None = None) -> None:
        """Look at the nodes named (``None``: all of them)."""
        if names is None:
            nodes = self.nodes.lister.list()
        else:
            nodes = [n for n in (self.nodes.lister.try_get(None, name) for name in sorted(names)) if n is not None]
        pending = iter(nodes)

        async def worker() -> None:
            for node in pending:  # one iterator shared by the workers: each node is looked at once
                try:
                    await self.monitor_node(node)
                except (Conflict, NotFound):
                    # look again with the newer object, once the informer has it: its update event
                    # wakes the loop (waking now would retry with the same stale copy until it came)
                    self._changed.add(node["metadata"]["name"])
                except StatusError as err:
                    logger.warning("node health update failed", extra={"node": node["metadata"]["name"], "error": str(err)})

        async with asyncio.TaskGroup() as tg:
            for i in range(min(NODE_UPDATE_WORKERS, len(nodes))):
                tg.create_task(worker(), name=f"nodelifecycle-worker-{i}")

    async def monitor_node(self, node: Any) -> None:
        name = node["metadata"]["name"]
        now_mono = self.clock.monotonic()
        health = self._health.get(name)
        has_ready, heartbeat, ready = self._ready_view(node, health)
        lease = self.leases.lister.try_get(LEASE_NAMESPACE, name)
        renew = ((lease or {}).get("spec") or {}).get("renewTime")
        if health is None:
            health = _Health(now_mono, heartbeat, renew, ready)
            if self.nodes.lister.try_get(None, name) is not None:  # not deleted meanwhile (its delete forgot it)
                self._health[name] = health
        if heartbeat != health.heartbeat or (renew and renew != health.renew):
            health.probe, health.heartbeat, health.renew = now_mono, heartbeat, renew
        grace = self.options.node_monitor_grace_period if has_ready else self.options.node_startup_grace_period
        if now_mono - health.probe > grace:
            node = await self._mark_unknown(node) or node
            _, _, ready = self._ready_view(node, health)
        if ready != "True" and (health.ready == "True" or ready == "Unknown"):
            if health.ready == "True":
                self.recorder.eventf(node, "Normal", "NodeNotReady", "Node %s status is now: NodeNotReady", name, resource=NODES)
            await self._mark_pods_not_ready(name)
        health.ready = ready
        rv = node["metadata"].get("resourceVersion")
        if rv is not None and rv == health.taints_checked:
            return
        taints = desired_taints(node, format_time(self.clock.now()))
        if taints != ((node.get("spec") or {}).get("taints") or []):
            await self.client.patch(NODES, None, name, {"metadata": {"resourceVersion": rv},
                                                         "spec": {"taints": taints or None}}, patch_type=PatchType.MERGE)
        else:
            health.taints_checked = rv

    @staticmethod
    def _ready_view(node: Any, health: _Health | None) -> tuple[bool, str | None, str | None]:
        """(has a Ready condition, its lastHeartbeatTime, its status), read once per Node resourceVersion."""
        rv = node["metadata"].get("resourceVersion")
        if health is not None and health.view is not None and rv is not None and health.view[0] == rv:
            return health.view[1]
        cond = _conditions(node).get("Ready")
        view = (cond is not None, (cond or {}).get("lastHeartbeatTime"), (cond or {}).get("status"))
        if health is not None:
            health.view = (rv, view)
        return view

    async def _mark_unknown(self, node: Any) -> Any | None:
        conds = _conditions(node)
        now = format_time(self.clock.now())
        changed = []
        for ctype in HEALTH_CONDITIONS:
            cond = conds.get(ctype)
            if cond is None:
                changed.append({"type": ctype, "status": "Unknown", "reason": "NodeStatusNeverUpdated",
                                "message": "Kubelet never posted node status.",
                                "lastHeartbeatTime": node["metadata"].get("creationTimestamp"), "lastTransitionTime": now})
            elif cond.get("status") != "Unknown":
                changed.append(dict(cond, status="Unknown", reason="NodeStatusUnknown",
                                    message="Kubelet stopped posting node status.", lastTransitionTime=now))
        if not changed:
            return None
        logger.info("node stopped posting status", extra={"node": node["metadata"]["name"]})
        return await self.client.patch(
            NODES, None, node["metadata"]["name"],
            {"metadata": {"resourceVersion": node["metadata"]["resourceVersion"]}, "status": {"conditions": changed}},
            patch_type=PatchType.STRATEGIC, subresource="status")

    async def _mark_pods_not_ready(self, node_name: str) -> None:
        now = format_time(self.clock.now())
        for pod in pods_on_node(self.pods, node_name):
            phase = (pod.get("status") or {}).get("phase")
            ready = next((c for c in (pod.get("status") or {}).get("conditions") or () if c.get("type") == "Ready"), None)
            if phase in ("Succeeded", "Failed") or ready is None or ready.get("status") == "False":
                continue
            meta = pod["metadata"]
            try:
                await self.client.patch(PODS, meta["namespace"], meta["name"],
                                        {"status": {"conditions": [dict(ready, status="False", lastTransitionTime=now)]}},
                                        patch_type=PatchType.STRATEGIC, subresource="status")
            except NotFound:
                continue
            self.recorder.event(pod, "Warning", "NodeNotReady", "Node is not ready", resource=PODS)


def new_controller(ctx: ControllerContext) -> NodeLifecycleController:
    return NodeLifecycleController(ctx)
