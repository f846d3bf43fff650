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
already being deleted are left alone. The queue is keyed by pod; a node whose
``NoExecute`` taints change queues every pod on that node (found through the
shared ``spec.nodeName`` index, :mod:`k8py.controllers.node_pods`), and a pod
change is queued only when there is something to decide: its node has
``NoExecute`` taints, or the pod is being timed. Other node changes (status
heartbeats, at thousands of nodes hundreds a second) and pod changes on
untainted nodes cost a dict lookup, as upstream's ``handleNodeUpdate`` and
``handlePodUpdate`` which return early when the taints are equal / absent.
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
from k8py.controllers.node_pods import ensure_node_name_index, pods_on_node
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
        ensure_node_name_index(self.pods)
        self.pods.add_event_handler(on_add=self._pod_changed, on_update=lambda o, n: self._pod_changed(n))
        self.nodes.add_event_handler(on_add=self._node_added, on_update=self._node_updated)
        #: pod key -> (its node's NoExecute taints as seen, monotonic time they were first seen)
        self._since: dict[str, tuple[str, float]] = {}
        self.evicted: list[str] = []

    def _pod_changed(self, pod: Any) -> None:
        meta = pod.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        node_name = (pod.get("spec") or {}).get("nodeName")
        node = self.nodes.lister.try_get(None, node_name) if node_name else None
        if key in self._since or _no_execute(node):
            self.enqueue(pod)

    def _node_added(self, node: Any) -> None:
        if _no_execute(node):
            self._node_changed(node)

    def _node_updated(self, old: Any, new: Any) -> None:
        if _no_execute(old) != _no_execute(new):
            self._node_changed(new)

    def _node_changed(self, node: Any) -> None:
        node = unwrap_tombstone(node)
        for pod in pods_on_node(self.pods, (node or {}).get("metadata", {}).get("name") or ""):
            self.enqueue(pod)

    async def sync(self, key: str) -> float | None:
        namespace, name = split_key(key)
        pod = self.pods.lister.try_get(namespace, name)
        node_name = ((pod or {}).get("spec") or {}).get("nodeName")
        node = self.nodes.lister.try_get(None, node_name) if node_name else None
        taints = _no_execute(node)
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


def _no_execute(node: Any) -> list[dict[str, Any]]:
    """The node's ``NoExecute`` taints, in order (none for no node)."""
    return [t for t in ((node or {}).get("spec") or {}).get("taints") or () if t.get("effect") == "NoExecute"]
