"""A Deployment's status and progress (upstream ``progress.go`` and the status
half of ``sync.go``).

A mixin of :class:`~k8py.controllers.deployment.controller.DeploymentController`:
the counts come from the freshest ReplicaSets the cache has seen
(:meth:`ProgressMixin._refresh_one`); the Progressing condition follows
``spec.paused`` and the progress deadline (NewReplicaSetAvailable,
ReplicaSetUpdated, ProgressDeadlineExceeded); ReplicaFailure is copied from
the ReplicaSets; a rollout in progress is looked at again when its deadline
would pass (the seconds :meth:`ProgressMixin._requeue_stuck` returns).
Status is written only when it changed, through the status subresource.
"""

from __future__ import annotations

from typing import Any, Mapping

from k8py.api.errors import Conflict
from k8py.client.resources import DEPLOYMENTS
from k8py.controllers.deployment import conditions as cond
from k8py.controllers.object_meta import meta as _meta
from k8py.controllers.pod_status import parse_time

__all__ = ["ProgressMixin"]


class ProgressMixin:
    rs_lister: Any
    _written: Any
    clock: Any
    client: Any
    _new_and_old: Any

    # -- status -----------------------------------------------------------------------------

    def _refresh_one(self, rs: Any | None) -> Any | None:
        """The cached (latest seen) version of ``rs`` if it is newer than ours."""
        if rs is None:
            return None
        cached = self.rs_lister.try_get(_meta(rs).get("namespace"), _meta(rs).get("name") or "")
        if cached is None or _meta(cached).get("uid") != _meta(rs).get("uid"):
            return rs
        try:
            if int(_meta(cached).get("resourceVersion") or 0) > int(_meta(rs).get("resourceVersion") or 0):
                return cached
        except ValueError:
            pass
        return rs

    def _refresh(self, d: Mapping[str, Any], rss: list[Any]) -> list[Any]:
        return [self._refresh_one(rs) for rs in rss if rs is not None]

    async def _sync_status_only(self, d: dict[str, Any], rss: list[Any]) -> None:
        new, old = await self._new_and_old(d, rss, create=False)
        status = cond.calculate_status(self._refresh(d, [*old, new]), self._refresh_one(new), d, self.clock.now())
        await self._update_status_if_changed(d, status)

    async def _check_paused_conditions(self, d: dict[str, Any]) -> None:
        if not cond.has_progress_deadline(d):
            return
        status = d.setdefault("status", {})
        current = cond.get_condition(status, cond.PROGRESSING)
        if current is not None and current.get("reason") == cond.TIMED_OUT_REASON:
            return
        paused_exists = current is not None and current.get("reason") == cond.PAUSED_REASON
        paused = bool((d.get("spec") or {}).get("paused"))
        now = self.clock.now()
        if paused and not paused_exists:
            cond.set_condition(status, cond.new_condition(cond.PROGRESSING, "Unknown", cond.PAUSED_REASON, "Deployment is paused", now))
        elif not paused and paused_exists:
            cond.set_condition(status, cond.new_condition(cond.PROGRESSING, "Unknown", cond.RESUMED_REASON, "Deployment is resumed", now))
        else:
            return
        await self._write_status(d)

    async def _sync_rollout_status(self, d: dict[str, Any], all_rss: list[Any], new: Any | None) -> float | None:
        now = self.clock.now()
        rss = self._refresh(d, all_rss)
        new = self._refresh_one(new)
        status = cond.calculate_status(rss, new, d, now)
        if not cond.has_progress_deadline(d):
            cond.remove_condition(status, cond.PROGRESSING)
        current = cond.get_condition(d.get("status") or {}, cond.PROGRESSING)
        complete = status.get("replicas", 0) == status.get("updatedReplicas", 0) and current is not None and \
            current.get("reason") == cond.NEW_RS_AVAILABLE_REASON
        new_name = _meta(new).get("name") if new is not None else ""
        if cond.has_progress_deadline(d) and not complete:
            if cond.deployment_complete(d, status):
                cond.set_condition(status, cond.new_condition(cond.PROGRESSING, "True", cond.NEW_RS_AVAILABLE_REASON,
                                                              f'ReplicaSet "{new_name}" has successfully progressed.', now))
            elif cond.deployment_progressing(d, status):
                condition = cond.new_condition(cond.PROGRESSING, "True", cond.RS_UPDATED_REASON, f'ReplicaSet "{new_name}" is progressing.', now)
                if current is not None and current.get("status") == "True":
                    condition["lastTransitionTime"] = current.get("lastTransitionTime")
                cond.remove_condition(status, cond.PROGRESSING)
                cond.set_condition(status, condition)
            elif cond.deployment_timed_out(d, status, now):
                cond.set_condition(status, cond.new_condition(cond.PROGRESSING, "False", cond.TIMED_OUT_REASON,
                                                              f'ReplicaSet "{new_name}" has timed out progressing.', now))
        failures = [c for rs in rss for c in ((rs.get("status") or {}).get("conditions") or ()) if c.get("type") == "ReplicaFailure"
                    and c.get("status") == "True"]
        if failures:
            cond.set_condition(status, {**failures[0]})
        else:
            cond.remove_condition(status, cond.REPLICA_FAILURE)
        if status == (d.get("status") or {}):
            return self._requeue_stuck(d, status)
        await self._update_status_if_changed(d, status)
        return self._requeue_stuck(d, status)

    def _requeue_stuck(self, d: Mapping[str, Any], status: Mapping[str, Any]) -> float | None:
        current = cond.get_condition(status, cond.PROGRESSING)
        if not cond.has_progress_deadline(d) or current is None:
            return None
        if cond.deployment_complete(d, status) or current.get("reason") == cond.TIMED_OUT_REASON:
            return None
        since = parse_time(current.get("lastUpdateTime"))
        if since is None:
            return None
        deadline = int((d.get("spec") or {}).get("progressDeadlineSeconds") or 0)
        after = (since - self.clock.now()).total_seconds() + deadline
        return 0.001 if after < 1 else after + 1

    async def _update_status_if_changed(self, d: dict[str, Any], status: dict[str, Any]) -> None:
        if status == (d.get("status") or {}):
            return
        d["status"] = status
        await self._write_status(d)

    async def _write_status(self, d: dict[str, Any]) -> None:
        """PUT ``d``'s status (and its revision annotation); keep ``d``'s resourceVersion current."""
        try:
            written = await self.client.update_status(DEPLOYMENTS, d)
        except Conflict:
            raise  # the loop retries with the latest object from the cache
        d.setdefault("metadata", {})["resourceVersion"] = _meta(written).get("resourceVersion")
        self._written.remember(f"{_meta(written).get('namespace')}/{_meta(written).get('name')}", written)
