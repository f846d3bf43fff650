"""The StatefulSet controller: pods with stable names, started and updated in order.

Upstream: ``pkg/controller/statefulset`` (``stateful_set_control.go``).
``sync(key)``:

1. resolves the *update* revision (the template's ControllerRevision, created
   or renumbered by :mod:`k8py.controllers.revision_control`) and the
   *current* one (``status.currentRevision``, the revision the set is rolling
   away from);
2. splits the owned pods into the ones in ``[start, start+replicas)`` and the
   condemned rest (:mod:`.ordinals`), deletes failed pods (they come back under
   the same name) and plans, ordinal by ordinal:

   - ``OrderedReady``: create the lowest missing pod and wait until it is
     Running and Ready before the next; remove condemned pods one at a time,
     highest first, and only while every pod below is healthy;
   - ``Parallel``: create and remove all at once, waiting for nothing;

3. ``RollingUpdate``: once every pod is healthy, deletes the highest-ordinal pod
   at an old revision whose ordinal is at least ``partition``, one at a time;
   it comes back at the update revision. Pods below the partition are (re)made
   at the current revision. ``OnDelete``: pods are replaced only when deleted;
4. writes status (``currentRevision`` becomes ``updateRevision`` when every
   pod is updated and ready) and trims history.

``volumeClaimTemplates`` are kept on the object but no PersistentVolumeClaims
are created or mounted: k8py has no storage provisioner yet.
"""

from __future__ import annotations

import copy
import logging
from typing import Any, Mapping

from k8py.api.errors import AlreadyExists, NotFound, StatusError
from k8py.api.selectors import label_selector_from_dict
from k8py.client.keys import split_key
from k8py.client.resources import PODS, STATEFULSETS
from k8py.controllers.context import ControllerContext
from k8py.controllers.controller_ref_manager import ControllerRefManager, recheck_owner
from k8py.controllers.history import REVISION_HASH_LABEL, revision_of_pod
from k8py.controllers.keyed_controller import KeyedController, unwrap_tombstone
from k8py.controllers.owner_refs import controller_ref, new_controller_ref
from k8py.controllers.pod_control import pod_from_template
from k8py.controllers.pod_status import is_pod_available, is_pod_ready, pod_ready_since
from k8py.controllers.revision_control import CONTROLLER_REVISIONS, HashCollision, RevisionControl
from k8py.controllers.statefulset.ordinals import (
    POD_INDEX_LABEL, POD_NAME_LABEL, ordinal_of, pod_name, split_pods, start_ordinal,
)

__all__ = ["StatefulSetController"]

logger = logging.getLogger(__name__)


def _deleting(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def _healthy(pod: Mapping[str, Any]) -> bool:
    """Running and Ready, and not on its way out (upstream ``isHealthy``)."""
    return (pod.get("status") or {}).get("phase") == "Running" and is_pod_ready(pod) and not _deleting(pod)


def _failed(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Failed", "Succeeded")


def template_of(revision: Mapping[str, Any]) -> dict[str, Any]:
    template = copy.deepcopy(((revision.get("data") or {}).get("spec") or {}).get("template") or {})
    template.pop("$patch", None)
    return template


class StatefulSetController(KeyedController):
    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, name="statefulset", queue_name="statefulset")
        self.sets = ctx.informers.informer(STATEFULSETS)
        self.pods = ctx.informers.informer(PODS)
        self.revisions = ctx.informers.informer(CONTROLLER_REVISIONS)
        self.set_lister = ctx.informers.lister(STATEFULSETS)
        self.pod_lister = ctx.informers.lister(PODS)
        self.wait_for(self.sets, self.pods, self.revisions)
        self.recorder = ctx.recorder("statefulset-controller")
        self.revision_control = RevisionControl(ctx.client, ctx.informers.lister(CONTROLLER_REVISIONS), "StatefulSet")
        self.sets.add_event_handler(on_add=self.enqueue, on_update=lambda old, new: self.enqueue(new),
                                    on_delete=self.enqueue)
        self.pods.add_event_handler(on_add=self._pod_changed, on_update=lambda old, new: self._pod_changed(new),
                                    on_delete=self._pod_changed)

    def _pod_changed(self, obj: Any) -> None:
        pod = unwrap_tombstone(obj)
        ref = controller_ref(pod) if isinstance(pod, dict) else None
        if ref is not None and ref.get("kind") == "StatefulSet":
            self.queue.add(f"{pod['metadata'].get('namespace')}/{ref.get('name')}")

    async def sync(self, key: str) -> float | None:
        namespace, name = split_key(key)
        cached = self.set_lister.try_get(namespace, name)
        if cached is None:
            return None
        sts = copy.deepcopy(cached)
        revisions = await self.revision_control.claim(sts, STATEFULSETS)
        try:
            update_rev, revisions = await self.revision_control.current(sts, revisions)
        except HashCollision:
            status = sts.setdefault("status", {})
            status["collisionCount"] = int(status.get("collisionCount") or 0) + 1
            await self.client.update_status(STATEFULSETS, sts)
            return None
        current_name = (sts.get("status") or {}).get("currentRevision")
        current_rev = next((r for r in revisions if r["metadata"]["name"] == current_name), update_rev)
        selector = label_selector_from_dict((sts.get("spec") or {}).get("selector"))
        manager = ControllerRefManager(self.client, sts, STATEFULSETS, PODS, selector,
                                       recheck_owner(self.client, STATEFULSETS, sts))
        # upstream isMemberOf: an orphan is adopted only if its name is one of ours
        pods = await manager.claim(self.pod_lister.list(namespace=namespace), matches=lambda p: bool(
            selector.matches((p.get("metadata") or {}).get("labels")) and ordinal_of(p, name) is not None))
        requeue: float | None = None
        if not sts["metadata"].get("deletionTimestamp"):
            requeue = await self._reconcile(sts, pods, current_rev, update_rev)
        await self._update_status(sts, pods, current_rev, update_rev)
        live = {h for p in pods if (h := revision_of_pod(p))}
        await self.revision_control.trim(
            sts, revisions, live_hashes=live,
            live_names={current_rev["metadata"]["name"], update_rev["metadata"]["name"]})
        return requeue

    def _revision_for(self, sts: dict[str, Any], ordinal: int, current: dict[str, Any],
                      update: dict[str, Any]) -> dict[str, Any]:
        strategy = (sts.get("spec") or {}).get("updateStrategy") or {}
        if strategy.get("type", "RollingUpdate") == "RollingUpdate":
            partition = int((strategy.get("rollingUpdate") or {}).get("partition") or 0)
            if ordinal < start_ordinal(sts) + partition:
                return current
        return update

    async def _reconcile(self, sts: dict[str, Any], pods: list[dict[str, Any]], current: dict[str, Any],
                         update: dict[str, Any]) -> float | None:
        spec = sts.get("spec") or {}
        name = sts["metadata"]["name"]
        start = start_ordinal(sts)
        replicas = int(spec.get("replicas", 1))
        ordered = spec.get("podManagementPolicy", "OrderedReady") != "Parallel"
        in_range, condemned = split_pods(pods, name, start, replicas)
        min_ready = int(spec.get("minReadySeconds") or 0)
        now = self.clock.now()
        for ordinal in range(start, start + replicas):
            pod = in_range.get(ordinal)
            if pod is not None and _failed(pod) and not _deleting(pod):
                await self._delete(sts, pod)  # recreated under the same name once gone
                pod = None
                if ordered:
                    return None
            if pod is None:
                await self._create(sts, ordinal, self._revision_for(sts, ordinal, current, update))
                if ordered:
                    return None
                continue
            if ordered and not _healthy(pod):
                return None  # wait for this one before the next
            if ordered and min_ready and not is_pod_available(pod, min_ready, now):
                since = pod_ready_since(pod)
                return float(min_ready) if since is None else max(0.1, (since - now).total_seconds() + min_ready)
        for pod in condemned:
            if _deleting(pod):
                if ordered:
                    return None
                continue
            if ordered and not all(_healthy(p) for p in in_range.values()):
                return None
            await self._delete(sts, pod)
            if ordered:
                return None
        strategy = spec.get("updateStrategy") or {}
        if strategy.get("type", "RollingUpdate") != "RollingUpdate":
            return None
        if not all(_healthy(in_range[o]) for o in range(start, start + replicas) if o in in_range) \
                or len(in_range) < replicas:
            return None
        partition = int((strategy.get("rollingUpdate") or {}).get("partition") or 0)
        update_hash = update["metadata"]["labels"][REVISION_HASH_LABEL]
        for ordinal in range(start + replicas - 1, start + partition - 1, -1):
            pod = in_range.get(ordinal)
            if pod is not None and revision_of_pod(pod) != update_hash:
                await self._delete(sts, pod)
                return None
        return None

    async def _create(self, sts: dict[str, Any], ordinal: int, revision: dict[str, Any]) -> bool:
        meta = sts["metadata"]
        spec = sts.get("spec") or {}
        template = template_of(revision)
        name = pod_name(meta["name"], ordinal)
        digest = revision["metadata"]["labels"][REVISION_HASH_LABEL]

        def mutate(pod: dict[str, Any]) -> None:
            labels = pod["metadata"].setdefault("labels", {})
            labels[REVISION_HASH_LABEL] = digest
            labels[POD_NAME_LABEL] = name
            labels[POD_INDEX_LABEL] = str(ordinal)
            pod["spec"]["hostname"] = name
            if spec.get("serviceName"):
                pod["spec"]["subdomain"] = spec["serviceName"]

        pod = pod_from_template(template, meta["namespace"], meta["name"], new_controller_ref(sts, STATEFULSETS))
        pod["metadata"].pop("generateName", None)
        pod["metadata"]["name"] = name
        mutate(pod)
        try:
            await self.client.create(PODS, pod, namespace=meta["namespace"])
        except AlreadyExists:
            return False  # an old pod of that name is still going away
        except StatusError as err:
            self._pod_event(sts, "Create", name, err)
            raise
        self._pod_event(sts, "Create", name, None)
        return True

    def _pod_event(self, sts: dict[str, Any], verb: str, pod_name_: str, err: Exception | None) -> None:
        """Upstream's ``recordPodEvent`` wording ("create Pod db-0 in StatefulSet db successful")."""
        set_name = sts["metadata"]["name"]
        if err is None:
            self.recorder.eventf(sts, "Normal", f"Successful{verb}",
                                 f"{verb.lower()} Pod {pod_name_} in StatefulSet {set_name} successful",
                                 resource=STATEFULSETS)
        else:
            self.recorder.eventf(sts, "Warning", f"Failed{verb}",
                                 f"{verb.lower()} Pod {pod_name_} in StatefulSet {set_name} failed error: {err}",
                                 resource=STATEFULSETS)

    async def _delete(self, sts: dict[str, Any], pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        try:
            await self.client.delete(PODS, pod["metadata"]["namespace"], name)
        except NotFound:
            return
        except StatusError as err:
            self._pod_event(sts, "Delete", name, err)
            raise
        self._pod_event(sts, "Delete", name, None)

    async def _update_status(self, sts: dict[str, Any], pods: list[dict[str, Any]], current: dict[str, Any],
                             update: dict[str, Any]) -> None:
        spec = sts.get("spec") or {}
        name = sts["metadata"]["name"]
        min_ready = int(spec.get("minReadySeconds") or 0)
        now = self.clock.now()
        mine = [p for p in pods if ordinal_of(p, name) is not None and not _deleting(p)]
        current_hash = current["metadata"]["labels"][REVISION_HASH_LABEL]
        update_hash = update["metadata"]["labels"][REVISION_HASH_LABEL]
        status: dict[str, Any] = dict(sts.get("status") or {})
        status.update({
            "observedGeneration": sts["metadata"].get("generation", 1),
            "replicas": len(mine),
            "readyReplicas": sum(1 for p in mine if is_pod_ready(p)),
            "availableReplicas": sum(1 for p in mine if is_pod_available(p, min_ready, now)),
            "currentReplicas": sum(1 for p in mine if revision_of_pod(p) == current_hash),
            "updatedReplicas": sum(1 for p in mine if revision_of_pod(p) == update_hash),
            "currentRevision": current["metadata"]["name"],
            "updateRevision": update["metadata"]["name"],
        })
        replicas = int(spec.get("replicas", 1))
        rolling = ((spec.get("updateStrategy") or {}).get("type", "RollingUpdate")) == "RollingUpdate"
        if rolling and status["updatedReplicas"] == replicas and status["readyReplicas"] == replicas and \
                status["replicas"] == replicas:  # upstream completeRollingUpdate (not for OnDelete)
            status["currentRevision"] = status["updateRevision"]
            status["currentReplicas"] = status["updatedReplicas"]
        for omitempty in ("readyReplicas", "currentReplicas", "updatedReplicas"):
            if status.get(omitempty) == 0:
                status.pop(omitempty)
        status.setdefault("collisionCount", 0)
        if status != (sts.get("status") or {}):
            sts["status"] = status
            await self.client.update_status(STATEFULSETS, sts)
