"""The Deployment controller: roll a Deployment's pods from ReplicaSet to ReplicaSet.

One ``sync(namespace/name)``, as upstream's ``syncDeployment``:

1. claim the ReplicaSets the selector matches (adopt / release);
2. being deleted: only refresh status; an empty selector selects nothing
   (Warning ``SelectingAll``);
3. keep the Progressing condition in step with ``spec.paused``; a paused
   Deployment, or one only resized (some active ReplicaSet's
   ``desired-replicas`` annotation differs from ``spec.replicas``), is
   scaled proportionally and its status refreshed (:meth:`sync_scale`);
4. otherwise roll out: ``Recreate`` (old ReplicaSets to zero, wait until
   their pods are gone, then the new one to full size) or ``RollingUpdate``
   (grow the new one within maxSurge, shrink old ones within
   maxUnavailable; :mod:`scaling` plans each step);
5. once complete, delete old ReplicaSets beyond ``revisionHistoryLimit``
   (only those scaled to zero and settled);
6. write status with the Progressing / Available / ReplicaFailure
   conditions; a rollout in progress is looked at again when its progress
   deadline would pass.

Rollback needs nothing here: ``kubectl rollout undo`` copies an old
ReplicaSet's template into the Deployment, whose ReplicaSet then becomes the
new one again and gets the next revision (its old numbers in
``revision-history``). The Deployment's own ``revision`` annotation is
written through the status subresource, as upstream does.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

from k8py.api.errors import AlreadyExists, Conflict, StatusError
from k8py.api.selectors import LabelSelector
from k8py.client.indexer import deep_copy
from k8py.client.keys import DeletedFinalStateUnknown, split_key
from k8py.client.resources import DEPLOYMENTS, PODS, REPLICASETS
from k8py.controllers.context import ControllerContext
from k8py.controllers.controller_ref_manager import ControllerRefManager, recheck_owner
from k8py.controllers.deployment import conditions as cond
from k8py.controllers.deployment import replica_sets as rsutil
from k8py.controllers.deployment.progress import ProgressMixin
from k8py.controllers.deployment.rollout import RolloutMixin
from k8py.controllers.deployment.scaling import (
    new_rs_new_replicas,
    proportional_plan,
)
from k8py.controllers.keyed_controller import KeyedController
from k8py.controllers.object_meta import meta as _meta
from k8py.controllers.owner_refs import controller_ref, ensure_controller_uid_index, new_controller_ref, owned_or_orphaned
from k8py.controllers.selectors import selector_from_dict
from k8py.controllers.written import WrittenObjects

__all__ = ["DeploymentController"]

logger = logging.getLogger(__name__)


class DeploymentController(RolloutMixin, ProgressMixin, KeyedController):
    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, name="deployment", queue_name="deployment")
        self.informer = ctx.informers.informer(DEPLOYMENTS)
        self.rs_informer = ctx.informers.informer(REPLICASETS)
        self.pod_informer = ctx.informers.informer(PODS)
        self.lister = self.informer.lister
        self.rs_lister = self.rs_informer.lister
        self.pod_lister = self.pod_informer.lister
        self.recorder = ctx.recorder("deployment-controller")
        self._written = WrittenObjects()
        ensure_controller_uid_index(self.rs_informer)
        self.wait_for(self.informer, self.rs_informer, self.pod_informer)
        self.informer.add_event_handler(on_add=self.enqueue, on_update=lambda old, new: self.enqueue(new), on_delete=self.enqueue)
        self.rs_informer.add_event_handler(on_add=self._add_rs, on_update=self._update_rs, on_delete=self._delete_rs)
        self.pod_informer.add_event_handler(on_delete=self._delete_pod)

    # -- event handlers -----------------------------------------------------------------

    def _resolve(self, namespace: str, ref: Mapping[str, Any] | None) -> Any | None:
        if ref is None or ref.get("kind") != "Deployment":
            return None
        d = self.lister.try_get(namespace, ref.get("name") or "")
        if d is None or _meta(d).get("uid") != ref.get("uid"):
            return None
        return d

    def _matching_deployments(self, rs: Mapping[str, Any]) -> list[Any]:
        labels = _meta(rs).get("labels") or {}
        out = []
        for d in self.lister.list(namespace=_meta(rs).get("namespace")):
            try:
                selector = selector_from_dict((d.get("spec") or {}).get("selector"))
            except StatusError:
                continue
            if not selector.empty and selector.matches(labels):
                out.append(d)
        return out

    def _add_rs(self, rs: Any) -> None:
        if _meta(rs).get("deletionTimestamp"):
            self._delete_rs(rs)
            return
        owner = self._resolve(_meta(rs).get("namespace") or "", controller_ref(rs))
        if owner is not None:
            self.enqueue(owner)
            return
        if controller_ref(rs) is None:
            for d in self._matching_deployments(rs):
                self.enqueue(d)

    def _update_rs(self, old: Any, new: Any) -> None:
        if _meta(old).get("resourceVersion") == _meta(new).get("resourceVersion"):
            return
        namespace = _meta(new).get("namespace") or ""
        new_ref, old_ref = controller_ref(new), controller_ref(old)
        if new_ref != old_ref and old_ref is not None:
            owner = self._resolve(namespace, old_ref)
            if owner is not None:
                self.enqueue(owner)
        if new_ref is not None:
            owner = self._resolve(namespace, new_ref)
            if owner is not None:
                self.enqueue(owner)
            return
        if _meta(old).get("labels") != _meta(new).get("labels") or new_ref != old_ref:
            for d in self._matching_deployments(new):
                self.enqueue(d)

    def _delete_rs(self, obj: Any) -> None:
        rs = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        if rs is None:
            return
        owner = self._resolve(_meta(rs).get("namespace") or "", controller_ref(rs))
        if owner is not None:
            self.enqueue(owner)

    def _delete_pod(self, obj: Any) -> None:
        """A Recreate rollout waits for old pods to be gone: their deletion wakes it."""
        pod = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        if pod is None:
            return
        namespace = _meta(pod).get("namespace") or ""
        ref = controller_ref(pod)
        if ref is None or ref.get("kind") != "ReplicaSet":
            return
        rs = self.rs_lister.try_get(namespace, ref.get("name") or "")
        if rs is None or _meta(rs).get("uid") != ref.get("uid"):
            return
        d = self._resolve(namespace, controller_ref(rs))
        if d is not None and not rsutil.is_rolling(d):
            self.enqueue(d)

    # -- sync ----------------------------------------------------------------------------

    async def sync(self, key: str) -> float | None:
        try:
            return await self._sync(key)
        except Conflict:
            # our cache is behind a Deployment or ReplicaSet we wrote: the watch
            # event of the newer version queues this key again, so waiting for
            # it beats a rate-limited retry (which a busy cluster turns into
            # minutes of backoff)
            logger.debug("conflict; waiting for the newer version", extra={"key": key})
            return None

    async def _sync(self, key: str) -> float | None:
        namespace, name = split_key(key)
        cached = self.lister.try_get(namespace, name)
        if cached is None:
            self._written.forget(key)
            return None
        # the status we last wrote, if the cache has not caught up with it: a
        # ReplicaSet's event often queues the next sync before our own write's
        # event has arrived, and a PUT from the cached version would conflict
        d = deep_copy(self._written.latest(key, cached))
        selector_dict = (d.get("spec") or {}).get("selector")
        if selector_dict == {} or selector_dict is None:
            self.recorder.event(d, "Warning", "SelectingAll", "This deployment is selecting all pods. A non-empty selector is required.",
                                resource=DEPLOYMENTS)
            if int((d.get("status") or {}).get("observedGeneration") or 0) < int(_meta(d).get("generation") or 0):
                d.setdefault("status", {})["observedGeneration"] = _meta(d).get("generation")
                await self._write_status(d)
            return None
        selector = selector_from_dict(selector_dict)
        rss = await self._claim_replica_sets(d, selector)
        if _meta(d).get("deletionTimestamp"):
            await self._sync_status_only(d, rss)
            return None
        await self._check_paused_conditions(d)
        if (d.get("spec") or {}).get("paused") or self._is_scaling_event(d, rss):
            await self.sync_scale(d, rss)
            return None
        if rsutil.is_rolling(d):
            return await self._rollout_rolling(d, rss)
        return await self._rollout_recreate(d, rss, selector)

    async def _claim_replica_sets(self, d: dict[str, Any], selector: LabelSelector) -> list[Any]:
        manager = ControllerRefManager(self.client, d, DEPLOYMENTS, REPLICASETS, selector, recheck_owner(self.client, DEPLOYMENTS, d))
        return await manager.claim(owned_or_orphaned(self.rs_informer, d))

    def _is_scaling_event(self, d: Mapping[str, Any], rss: list[Any]) -> bool:
        want = rsutil.replicas_of(d)
        for rs in rsutil.active(rss):
            desired = rsutil.desired_replicas(rs)
            if desired is not None and desired != want:
                return True
        return False

    # -- the new ReplicaSet --------------------------------------------------------------

    async def _new_and_old(self, d: dict[str, Any], rss: list[Any], *, create: bool) -> tuple[Any | None, list[Any]]:
        existing = rsutil.find_new_replica_set(d, rss)
        old = rsutil.find_old_replica_sets(d, rss, existing)
        new = await self._get_new_replica_set(d, rss, old, existing, create=create)
        return new, old

    async def _get_new_replica_set(self, d: dict[str, Any], rss: list[Any], old: list[Any], existing: Any | None, *,
                                   create: bool) -> Any | None:
        new_revision = rsutil.max_revision(old) + 1
        spec = d.get("spec") or {}
        now = self.clock.now()
        if existing is not None:
            # copies of just what may change (annotations, spec.minReadySeconds):
            # every sync of a rolling Deployment comes here, and it seldom
            # changes anything, so a deep copy of the template each time was waste
            meta = _meta(existing)
            rs = {**existing, "metadata": {**meta, "annotations": dict(meta.get("annotations") or {})},
                  "spec": dict(existing.get("spec") or {})}
            changed = rsutil.set_new_replica_set_annotations(d, rs, new_revision, True)
            min_ready = int(spec.get("minReadySeconds") or 0)
            if changed or int((rs.get("spec") or {}).get("minReadySeconds") or 0) != min_ready:
                rs["spec"]["minReadySeconds"] = min_ready
                rs = await self.client.update(REPLICASETS, rs)
            needs_update = self._set_revision(d, (_meta(rs).get("annotations") or {}).get(rsutil.REVISION_ANNOTATION, ""))
            status = d.setdefault("status", {})
            if cond.has_progress_deadline(d) and cond.get_condition(status, cond.PROGRESSING) is None:
                cond.set_condition(status, cond.new_condition(cond.PROGRESSING, "True", cond.FOUND_NEW_RS_REASON,
                                                              f'Found new replica set "{_meta(rs)["name"]}"', now))
                needs_update = True
            if needs_update:
                await self._write_status(d)
            return rs
        if not create:
            return None
        status = d.setdefault("status", {})
        collision = status.get("collisionCount")
        template = deep_copy(spec.get("template") or {})
        pod_hash = rsutil.template_hash(spec.get("template") or {}, collision)
        template.setdefault("metadata", {}).setdefault("labels", {})[rsutil.POD_TEMPLATE_HASH_LABEL] = pod_hash
        selector = deep_copy(spec.get("selector") or {})
        selector.setdefault("matchLabels", {})[rsutil.POD_TEMPLATE_HASH_LABEL] = pod_hash
        name = f"{_meta(d)['name']}-{pod_hash}"
        new_rs: dict[str, Any] = {
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": _meta(d)["namespace"], "labels": dict(template["metadata"]["labels"]),
                         "ownerReferences": [new_controller_ref(d, DEPLOYMENTS)]},
            "spec": {"replicas": 0, "minReadySeconds": int(spec.get("minReadySeconds") or 0), "selector": selector, "template": template},
        }
        replicas = new_rs_new_replicas(d, [*old, new_rs], new_rs)
        new_rs["spec"]["replicas"] = replicas
        rsutil.set_new_replica_set_annotations(d, new_rs, new_revision, False)
        already_exists = False
        try:
            created = await self.client.create(REPLICASETS, new_rs)
        except AlreadyExists:
            found = self.rs_lister.try_get(_meta(d)["namespace"], name) or await self.client.get(REPLICASETS, _meta(d)["namespace"], name)
            ref = controller_ref(found)
            if ref is not None and ref.get("uid") == _meta(d).get("uid") and rsutil.equal_ignore_hash(
                    (found.get("spec") or {}).get("template") or {}, spec.get("template") or {}):
                created, already_exists = found, True
            else:
                status["collisionCount"] = int(collision or 0) + 1
                await self._write_status(d)
                raise
        except StatusError as err:
            if cond.has_progress_deadline(d):
                cond.set_condition(status, cond.new_condition(cond.PROGRESSING, "False", cond.FAILED_RS_CREATE_REASON,
                                                              f'Failed to create new replica set "{name}": {err.message}', now))
                await self._write_status(d)
            self.recorder.eventf(d, "Warning", "FailedCreate", 'Failed to create new replica set "%s": %s', name, err.message,
                                 resource=DEPLOYMENTS)
            raise
        if not already_exists and replicas > 0:
            self.recorder.eventf(d, "Normal", "ScalingReplicaSet", "Scaled up replica set %s from 0 to %d", name, replicas,
                                 resource=DEPLOYMENTS)
        needs_update = self._set_revision(d, str(new_revision))
        if not already_exists and cond.has_progress_deadline(d):
            cond.set_condition(status, cond.new_condition(cond.PROGRESSING, "True", cond.NEW_RS_REASON,
                                                          f'Created new replica set "{name}"', now))
            needs_update = True
        if needs_update:
            await self._write_status(d)
        return created

    @staticmethod
    def _set_revision(d: dict[str, Any], revision: str) -> bool:
        annotations = d.setdefault("metadata", {}).setdefault("annotations", {})
        if not revision or annotations.get(rsutil.REVISION_ANNOTATION) == revision:
            return False
        annotations[rsutil.REVISION_ANNOTATION] = revision
        return True

    # -- scaling ------------------------------------------------------------------------

    async def scale_replica_set(self, rs: Any, size: int, d: Mapping[str, Any]) -> tuple[bool, Any]:
        """Resize ``rs`` (and refresh its replicas annotations); ``(scaled, rs)``."""
        desired = rsutil.replicas_of(d)
        maximum = desired + rsutil.max_surge(d)
        old_size = rsutil.replicas_of(rs)
        if old_size == size and not rsutil.replicas_annotations_need_update(rs, desired, maximum):
            return False, rs
        # copies of just the parts that change (the body is only encoded)
        meta = _meta(rs)
        body = {**rs, "metadata": {**meta, "annotations": dict(meta.get("annotations") or {})},
                "spec": {**(rs.get("spec") or {}), "replicas": size}}
        rsutil.set_replicas_annotations(body, desired, maximum)
        updated = await self.client.update(REPLICASETS, body)
        if old_size != size:
            direction = "up" if size > old_size else "down"
            self.recorder.eventf(d, "Normal", "ScalingReplicaSet", "Scaled %s replica set %s from %d to %d",
                                 direction, _meta(rs)["name"], old_size, size, resource=DEPLOYMENTS)
        return old_size != size, updated

    async def _apply(self, plan: list[tuple[Any, int]], d: Mapping[str, Any], rss: list[Any]) -> int:
        """Carry out a scaling plan; returns how many ReplicaSets changed size. ``rss`` is updated in place."""
        changed = 0
        for rs, size in plan:
            scaled, updated = await self.scale_replica_set(rs, size, d)
            changed += scaled
            for i, other in enumerate(rss):
                if other is rs:
                    rss[i] = updated
        return changed

    async def sync_scale(self, d: dict[str, Any], rss: list[Any]) -> None:
        """Paused or resized: scale proportionally, clean up (when paused), refresh status (upstream ``sync``)."""
        new, old = await self._new_and_old(d, rss, create=False)
        await self._scale(d, new, old)
        if (d.get("spec") or {}).get("paused"):
            await self._cleanup(d, old)
        fresh = self._refresh(d, [*old, new])
        status = cond.calculate_status(fresh, self._refresh_one(new), d, self.clock.now())
        await self._update_status_if_changed(d, status)

    async def _scale(self, d: dict[str, Any], new: Any | None, old: list[Any]) -> None:
        candidates = rsutil.active([*old, new])
        if len(candidates) <= 1:
            target = candidates[0] if candidates else (new if new is not None else (rsutil.by_creation(old)[-1] if old else None))
            if target is not None and rsutil.replicas_of(target) != rsutil.replicas_of(d):
                await self.scale_replica_set(target, rsutil.replicas_of(d), d)
            return
        if new is not None and rsutil.desired_replicas(new) == rsutil.replicas_of(d) and \
                rsutil.replicas_of(new) == rsutil.replicas_of(d) and rsutil.available_of(new) == rsutil.replicas_of(d):
            for rs in rsutil.active(old):
                await self.scale_replica_set(rs, 0, d)
            return
        plan = proportional_plan(d, new, old)
        await self._apply(plan, d, [*old, new])
