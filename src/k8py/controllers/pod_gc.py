"""PodGC (``podgc``): delete pods nobody else will (upstream ``podgc`` controller).

Every ``pod_gc_period`` seconds (upstream: 20):

- *terminated* pods (Succeeded or Failed) beyond
  ``--terminated-pod-gc-threshold`` are deleted, oldest first (a threshold of
  0 or less turns this off);
- *orphaned* pods, bound to a node that does not exist, are force-deleted
  once the node has been missing for ``pod_gc_quarantine`` seconds and a
  fresh read confirms it is gone; first their status says why (phase Failed,
  condition ``DisruptionTarget`` reason ``DeletionByPodGC``), as upstream;
- *unscheduled terminating* pods (a deletionTimestamp, no node: no kubelet
  will finish them) are force-deleted.

Force delete means grace period 0.
"""

from __future__ import annotations

import logging
from typing import Any

from k8py.api.errors import NotFound, StatusError
from k8py.client.resources import NODES, PODS
from k8py.client.rest import PatchType
from k8py.controllers.context import ControllerContext
from k8py.controllers.object_meta import meta as _meta
from k8py.controllers.pod_status import format_time, is_pod_terminated

__all__ = ["PodGC", "new_controller"]

logger = logging.getLogger(__name__)


class PodGC:
    def __init__(self, ctx: ControllerContext) -> None:
        self.name = "podgc"
        self.ctx = ctx
        self.client = ctx.client
        self.clock = ctx.clock
        self.pods = ctx.informers.informer(PODS)
        self.nodes = ctx.informers.informer(NODES)
        self.threshold = ctx.options.terminated_pod_gc_threshold
        self._missing_since: dict[str, float] = {}
        self.deleted: list[str] = []

    async def run(self) -> None:
        await self.pods.wait_for_cache_sync()
        await self.nodes.wait_for_cache_sync()
        while True:
            try:
                await self.gc()
            except StatusError as err:
                logger.warning("pod GC pass failed", extra={"error": str(err)})
            await self.clock.sleep(self.ctx.options.pod_gc_period)

    async def gc(self) -> None:
        pods = self.pods.lister.list()
        await self.gc_terminated(pods)
        await self.gc_orphaned(pods)
        await self.gc_unscheduled_terminating(pods)

    async def gc_terminated(self, pods: list[Any]) -> None:
        if self.threshold <= 0:
            return
        terminated = [p for p in pods if is_pod_terminated(p) and not _meta(p).get("deletionTimestamp")]
        excess = len(terminated) - self.threshold
        if excess <= 0:
            return
        terminated.sort(key=lambda p: (_meta(p).get("creationTimestamp") or "", _meta(p).get("name") or ""))
        for pod in terminated[:excess]:
            await self._delete(pod, force=False)

    async def gc_orphaned(self, pods: list[Any]) -> None:
        now = self.clock.monotonic()
        # the pods' nodes looked up in the cache, rather than a set of every node's name each pass
        # (at 5,000 nodes, most of this pass's CPU)
        named = {(p.get("spec") or {}).get("nodeName") for p in pods} - {None, ""}
        missing = {n for n in named if self.nodes.lister.try_get(None, n) is None}
        for node in list(self._missing_since):
            if node not in missing:
                del self._missing_since[node]
        for node in missing:
            self._missing_since.setdefault(node, now)
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if not node or node not in missing or now - self._missing_since[node] < self.ctx.options.pod_gc_quarantine:
                continue
            try:
                await self.client.get(NODES, None, node)
                continue  # it exists after all: the cache was behind
            except NotFound:
                pass
            await self._mark_failed(pod, "PodGC: node no longer exists")
            await self._delete(pod, force=True)

    async def gc_unscheduled_terminating(self, pods: list[Any]) -> None:
        for pod in pods:
            if _meta(pod).get("deletionTimestamp") and not (pod.get("spec") or {}).get("nodeName"):
                await self._delete(pod, force=True)

    async def _mark_failed(self, pod: Any, message: str) -> None:
        if is_pod_terminated(pod):
            return
        now = format_time(self.clock.now())
        status = {"phase": "Failed", "conditions": [
            {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC", "message": message, "lastTransitionTime": now}]}
        try:
            await self.client.patch(PODS, _meta(pod)["namespace"], _meta(pod)["name"], {"status": status},
                                    patch_type=PatchType.STRATEGIC, subresource="status")
        except NotFound:
            pass

    async def _delete(self, pod: Any, *, force: bool) -> None:
        meta = _meta(pod)
        try:
            await self.client.delete(PODS, meta["namespace"], meta["name"], grace_period_seconds=0 if force else None,
                                     preconditions={"uid": meta.get("uid")} if meta.get("uid") else None)
        except NotFound:
            return
        self.deleted.append(f"{meta['namespace']}/{meta['name']}")
        logger.info("PodGC deleted pod", extra={"pod": f"{meta['namespace']}/{meta['name']}", "force": force})


def new_controller(ctx: ControllerContext) -> PodGC:
    return PodGC(ctx)
