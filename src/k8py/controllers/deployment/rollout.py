"""How a Deployment's ReplicaSets move during a rollout (upstream ``rolling.go``,
``recreate.go`` and the history clean-up of ``sync.go``).

A mixin of :class:`~k8py.controllers.deployment.controller.DeploymentController`
(as upstream's methods on one struct are split over files): it reads the
listers and uses ``scale_replica_set``, ``_apply``, ``_new_and_old`` and the
status methods of :mod:`.progress` that the controller provides.

- RollingUpdate: grow the new ReplicaSet within maxSurge, then clean up
  unhealthy old replicas and shrink old ReplicaSets within maxUnavailable;
- Recreate: old ReplicaSets to zero, wait until none of their pods runs,
  then the new one to full size;
- once the rollout is complete, delete old ReplicaSets beyond
  ``revisionHistoryLimit`` (only those at zero and settled).
"""

from __future__ import annotations

from typing import Any, Mapping

from k8py.api.errors import NotFound
from k8py.api.selectors import LabelSelector
from k8py.client.resources import REPLICASETS
from k8py.controllers.deployment import conditions as cond
from k8py.controllers.deployment import replica_sets as rsutil
from k8py.controllers.deployment.scaling import new_rs_new_replicas, old_rs_cleanup_plan, old_rs_scale_down_plan
from k8py.controllers.object_meta import meta as _meta
from k8py.controllers.owner_refs import controller_ref

__all__ = ["RolloutMixin"]


class RolloutMixin:
    pod_lister: Any
    client: Any
    scale_replica_set: Any
    _apply: Any
    _new_and_old: Any
    _sync_rollout_status: Any
    _refresh_one: Any

    # -- rollouts ---------------------------------------------------------------------------

    async def _rollout_rolling(self, d: dict[str, Any], rss: list[Any]) -> float | None:
        new, old = await self._new_and_old(d, rss, create=True)
        all_rss = [*old, new]
        desired = rsutil.replicas_of(d)
        size = rsutil.replicas_of(new)
        if size > desired:
            scaled, new = await self.scale_replica_set(new, desired, d)
            if scaled:
                return await self._sync_rollout_status(d, [*old, new], new)
        elif size < desired:
            scaled, new = await self.scale_replica_set(new, new_rs_new_replicas(d, all_rss, new), d)
            if scaled:
                return await self._sync_rollout_status(d, [*old, new], new)
        all_rss = [*old, new]
        active_old = rsutil.active(old)
        cleanup, cleaned = old_rs_cleanup_plan(d, active_old, new, all_rss)
        changed = await self._apply(cleanup, d, old)
        active_old = rsutil.active(old)
        changed += await self._apply(old_rs_scale_down_plan(d, active_old, [*old, new]), d, old)
        if changed or cleaned:
            return await self._sync_rollout_status(d, [*old, new], new)
        if cond.deployment_complete(d, d.get("status") or {}):
            await self._cleanup(d, old)
        return await self._sync_rollout_status(d, [*old, new], new)

    async def _rollout_recreate(self, d: dict[str, Any], rss: list[Any], selector: LabelSelector) -> float | None:
        new, old = await self._new_and_old(d, rss, create=False)
        scaled = 0
        for rs in rsutil.active(old):
            did, _ = await self.scale_replica_set(rs, 0, d)
            scaled += did
        if scaled:
            return await self._sync_rollout_status(d, [*old, new], new)
        if self._old_pods_running(d, new, old):
            return await self._sync_rollout_status(d, [*old, new], new)
        if new is None:
            new, old = await self._new_and_old(d, rss, create=True)
        if rsutil.replicas_of(new) != rsutil.replicas_of(d):
            _, new = await self.scale_replica_set(new, rsutil.replicas_of(d), d)
        if cond.deployment_complete(d, d.get("status") or {}):
            await self._cleanup(d, old)
        return await self._sync_rollout_status(d, [*old, new], new)

    def _old_pods_running(self, d: Mapping[str, Any], new: Any | None, old: list[Any]) -> bool:
        if sum(rsutil.status_replicas(self._refresh_one(rs)) for rs in old) > 0:
            return True
        old_uids = {_meta(rs).get("uid") for rs in old}
        for pod in self.pod_lister.list(namespace=_meta(d).get("namespace")):
            ref = controller_ref(pod) or {}
            if ref.get("uid") in old_uids and (pod.get("status") or {}).get("phase") not in ("Failed", "Succeeded"):
                return True
        return False

    # -- history ----------------------------------------------------------------------------

    async def _cleanup(self, d: Mapping[str, Any], old: list[Any]) -> None:
        limit = (d.get("spec") or {}).get("revisionHistoryLimit")
        if limit is None:
            return
        alive = [rs for rs in old if rs is not None and not _meta(rs).get("deletionTimestamp")]
        diff = len(alive) - int(limit)
        if diff <= 0:
            return
        alive.sort(key=lambda rs: (rsutil.revision_of(rs), _meta(rs).get("creationTimestamp") or ""))
        for rs in alive[:diff]:
            rs = self._refresh_one(rs)
            status = rs.get("status") or {}
            if rsutil.status_replicas(rs) != 0 or rsutil.replicas_of(rs) != 0 or \
                    int(_meta(rs).get("generation") or 0) > int(status.get("observedGeneration") or 0):
                continue
            try:
                await self.client.delete(REPLICASETS, _meta(rs)["namespace"], _meta(rs)["name"])
            except NotFound:
                pass
