"""Informer events -> the cache and the queue (upstream ``eventhandlers.go``).

Pods are split by ``spec.nodeName``:

- **assigned** pods go to the cache (confirming an assumption if it was ours)
  and their adds, label changes, scale-downs and deletions are cluster events
  for the queue;
- **pending** pods whose ``schedulerName`` names one of our profiles go to
  the queue; a pending pod being deleted leaves it (and a waiting pod in
  Permit is rejected).

Node adds, deletes and the changes that matter for scheduling (allocatable,
labels, taints/unschedulable, conditions) update the cache and are cluster
events. Handlers run on the event loop between scheduling cycles.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from k8py.client.keys import DeletedFinalStateUnknown

if TYPE_CHECKING:
    from k8py.scheduler.scheduler import Scheduler

__all__ = ["EventHandlers", "node_update_actions", "pod_spec_changed"]

logger = logging.getLogger(__name__)

Object = dict[str, Any]


def _key(pod: Object) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def node_update_actions(old: Object, new: Object) -> list[str]:
    actions = []
    o_spec, n_spec = old.get("spec") or {}, new.get("spec") or {}
    o_status, n_status = old.get("status") or {}, new.get("status") or {}
    if o_status.get("allocatable") != n_status.get("allocatable"):
        actions.append("UpdateNodeAllocatable")
    if (old.get("metadata") or {}).get("labels") != (new.get("metadata") or {}).get("labels"):
        actions.append("UpdateNodeLabel")
    if o_spec.get("taints") != n_spec.get("taints") or bool(o_spec.get("unschedulable")) != bool(n_spec.get("unschedulable")):
        actions.append("UpdateNodeTaint")
    if o_status.get("conditions") != n_status.get("conditions"):
        actions.append("UpdateNodeCondition")
    if o_status.get("images") != n_status.get("images"):
        actions.append("UpdateNodeImages")
    return actions


def pod_spec_changed(old: Object, new: Object) -> bool:
    """Whether anything but status/resourceVersion changed (upstream ``isPodUpdated``)."""
    o_meta, n_meta = old.get("metadata") or {}, new.get("metadata") or {}
    return (old.get("spec") != new.get("spec") or o_meta.get("labels") != n_meta.get("labels")
            or o_meta.get("annotations") != n_meta.get("annotations"))


class EventHandlers:
    def __init__(self, scheduler: "Scheduler") -> None:
        self.s = scheduler

    # -- pods --------------------------------------------------------------------------

    def _responsible(self, pod: Object) -> bool:
        return ((pod.get("spec") or {}).get("schedulerName") or "default-scheduler") in self.s.frameworks

    @staticmethod
    def _assigned(pod: Object) -> bool:
        return bool((pod.get("spec") or {}).get("nodeName"))

    @staticmethod
    def _terminal(pod: Object) -> bool:
        return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")

    def on_pod_add(self, pod: Object) -> None:
        if self._assigned(pod):
            if self._terminal(pod):
                return
            self.s.cache.add_pod(pod)
            self.s.queue.delete(_key(pod))
            self.s.on_cluster_event("AssignedPod", ("Add",), None, pod)
        elif self._responsible(pod) and not (pod.get("metadata") or {}).get("deletionTimestamp"):
            where = self.s.queue.add(pod)
            self.s.metrics.incoming(where, "PodAdd")

    def on_pod_update(self, old: Object, new: Object) -> None:
        key = _key(new)
        if self._assigned(new):
            if self._terminal(new):
                self.on_pod_delete(new)
                return
            was_assigned = self._assigned(old)
            self.s.cache.update_pod(new)
            self.s.queue.delete(key)
            if not was_assigned:
                self.s.on_cluster_event("AssignedPod", ("Add",), None, new)
                return
            actions = []
            if (old.get("metadata") or {}).get("labels") != (new.get("metadata") or {}).get("labels"):
                actions.append("UpdatePodLabel")
            if old.get("spec") != new.get("spec"):
                actions.append("UpdatePodScaleDown")
            if actions:
                self.s.on_cluster_event("AssignedPod", actions, old, new)
            return
        if not self._responsible(new):
            self.s.queue.delete(key)
            return
        if (new.get("metadata") or {}).get("deletionTimestamp"):
            self.s.queue.delete(key)
            self.s.reject_waiting_pod(new, "pod is being deleted")
            return
        if self.s.cache.is_assumed(key):
            return  # our bind is in flight; the informer has not seen it land yet
        self.s.queue.update(new, requeue=pod_spec_changed(old, new))

    def on_pod_delete(self, obj: Any) -> None:
        pod = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        if pod is None:
            return
        key = _key(pod)
        if self._assigned(pod) or self.s.cache.pod(key) is not None:
            removed = self.s.cache.remove_pod(key)
            if removed is not None:
                self.s.on_cluster_event("AssignedPod", ("Delete",), pod, None)
        self.s.queue.delete(key)
        self.s.reject_waiting_pod(pod, "pod is deleted")

    # -- nodes ------------------------------------------------------------------------------

    def on_node_add(self, node: Object) -> None:
        self.s.cache.add_node(node)
        self.s.on_cluster_event("Node", ("Add",), None, node)

    def on_node_update(self, old: Object, new: Object) -> None:
        self.s.cache.update_node(new)
        actions = node_update_actions(old, new)
        if actions:
            self.s.on_cluster_event("Node", actions, old, new)

    def on_node_delete(self, obj: Any) -> None:
        node = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        name = (node or {}).get("metadata", {}).get("name") if isinstance(node, dict) else None
        if not name and isinstance(obj, DeletedFinalStateUnknown):
            name = obj.key
        if name:
            self.s.cache.remove_node(name)
            self.s.on_cluster_event("Node", ("Delete",), node, None)
