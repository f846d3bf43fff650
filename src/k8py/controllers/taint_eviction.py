"""Taint eviction (``taint-eviction-controller``): delete pods from nodes with
``NoExecute`` taints they do not tolerate (upstream ``pkg/controller/tainteviction``).

For each pod bound to a node with ``NoExecute`` taints:

- a taint no toleration matches: the pod is evicted now;
- all tolerated: it is evicted ``min(tolerationSeconds)`` after the controller
  first saw it under those taints (upstream's start time is also the moment
  of observation), never if no toleration used has ``tolerationSeconds``;
- the taints go (node back) before the time: nothing happens.

Eviction = a ``DisruptionTarget`` condition (reason ``DeletionByTaintManager``,
message "Taint manager: deleting due to NoExecute taint") on the pod's status,
a ``TaintManagerEviction`` Event, then a normal (graceful) delete. Pods
already being deleted are left alone. The queue is keyed by pod; a node change
queues every pod on that node.
"""

from __future__ import annotations

import logging
from typing import Any

from k8py.api.errors import NotFound
from k8py.client.keys import split_key
from k8py.client.resources import NODES, PODS
from k8py.client.rest import PatchType
from k8py.controllers.context import ControllerContext
from k8py.controllers.keyed_controller import KeyedController, unwrap_tombstone
from k8py.controllers.node_taints import min_toleration_seconds, untolerated
from k8py.controllers.pod_status import format_time

__all__ = ["TaintEvictionController", "new_controller"]

logger = logging.getLogger(__name__)


class TaintEvictionController(KeyedController):
    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, name="taint-eviction-controller", queue_name="taint-eviction-controller", workers=4)
        self.recorder = ctx.recorder("taint-eviction-controller")
        self.pods = ctx.informers.informer(PODS)
        self.nodes = ctx.informers.informer(NODES)
        self.wait_for(self.pods, self.nodes)
        self.pods.add_event_handler(on_add=self.enqueue, on_update=lambda o, n: self.enqueue(n))
        self.nodes.add_event_handler(on_add=self._node_changed, on_update=lambda o, n: self._node_changed(n))
        #: pod key -> (its node's NoExecute taints as seen, monotonic time they were first seen)
        self._since: dict[str, tuple[str, float]] = {}
        self.evicted: list[str] = []

    def _node_changed(self, node: Any) -> None:
        node = unwrap_tombstone(node)
        name = (node or {}).get("metadata", {}).get("name")
        for pod in self.pods.lister.list():
            if (pod.get("spec") or {}).get("nodeName") == name:
                self.enqueue(pod)

    async def sync(self, key: str) -> float | None:
        namespace, name = split_key(key)
        pod = self.pods.lister.try_get(namespace, name)
        node_name = ((pod or {}).get("spec") or {}).get("nodeName")
        node = self.nodes.lister.try_get(None, node_name) if node_name else None
        taints = [t for t in ((node or {}).get("spec") or {}).get("taints") or () if t.get("effect") == "NoExecute"]
        if pod is None or pod["metadata"].get("deletionTimestamp") or not taints:
            self._since.pop(key, None)
            return None
        tolerations = [t for t in (pod.get("spec") or {}).get("tolerations") or () if isinstance(t, dict)]
        if untolerated(taints, tolerations):
            await self._evict(pod)
            return None
        seconds = min_toleration_seconds(taints, tolerations)
        if seconds is None:
            self._since.pop(key, None)
            return None
        signature = repr(sorted((t.get("key") or "", t.get("value") or "") for t in taints))
        seen = self._since.get(key)
        if seen is None or seen[0] != signature:
            seen = self._since[key] = (signature, self.clock.monotonic())
        left = seen[1] + seconds - self.clock.monotonic()
        if left > 0:
            return left
        await self._evict(pod)
        return None

    async def _evict(self, pod: Any) -> None:
        meta = pod["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        self._since.pop(key, None)
        self.recorder.eventf(pod, "Normal", "TaintManagerEviction", "Marking for deletion Pod %s", key, resource=PODS)
        condition = {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager",
                     "message": "Taint manager: deleting due to NoExecute taint",
                     "lastTransitionTime": format_time(self.clock.now())}
        try:
            await self.client.patch(PODS, meta["namespace"], meta["name"], {"status": {"conditions": [condition]}},
                                    patch_type=PatchType.STRATEGIC, subresource="status")
            await self.client.delete(PODS, meta["namespace"], meta["name"],
                                     preconditions={"uid": meta["uid"]} if meta.get("uid") else None)
        except NotFound:
            return
        self.evicted.append(key)
        logger.info("evicted pod from a NoExecute-tainted node", extra={"pod": key, "node": pod["spec"].get("nodeName")})


def new_controller(ctx: ControllerContext) -> TaintEvictionController:
    return TaintEvictionController(ctx)
