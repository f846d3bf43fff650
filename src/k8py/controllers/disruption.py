"""Disruption (``disruption``): keep each PodDisruptionBudget's status
(upstream ``pkg/controller/disruption``).

For a budget, over the pods of its namespace its selector matches:

- ``expectedPods``: with an integer ``minAvailable``, the number of pods;
  otherwise (a percentage, or ``maxUnavailable``) the replicas their
  controllers want, summed (ReplicaSets owned by a Deployment count as the
  Deployment; StatefulSets and ReplicationControllers by their spec); a pod
  with no controller then fails the sync with a ``NoControllers`` Event;
- ``desiredHealthy``: ``minAvailable`` (a percentage rounded up), or
  ``expectedPods - maxUnavailable`` (rounded up too);
- ``currentHealthy``: pods Ready, not being deleted and not in
  ``disruptedPods``;
- ``disruptionsAllowed = max(0, currentHealthy - desiredHealthy)`` (0 when no
  pod is expected) and the ``DisruptionAllowed`` condition
  (``SufficientPods`` / ``InsufficientPods``; ``SyncFailed`` on an error).

``disruptedPods`` is written by the eviction subresource: an entry leaves
when its pod is gone or being deleted, or after two minutes (upstream's
``DeletionTimeout``: the eviction never turned into a deletion); the budget is
looked at again when the oldest entry expires.
"""

from __future__ import annotations

import logging
import math
from datetime import timedelta
from typing import Any

from k8py.api.errors import NotFound
from k8py.api.selectors import label_selector_from_dict
from k8py.client.keys import split_key
from k8py.client.resources import DEPLOYMENTS, POD_DISRUPTION_BUDGETS, PODS, REPLICASETS, REPLICATION_CONTROLLERS, STATEFULSETS
from k8py.controllers.context import ControllerContext
from k8py.controllers.keyed_controller import KeyedController, unwrap_tombstone
from k8py.controllers.owner_refs import controller_ref
from k8py.controllers.pod_status import format_time, parse_time

__all__ = ["DisruptionController", "new_controller", "DELETION_TIMEOUT"]

logger = logging.getLogger(__name__)

DELETION_TIMEOUT = 120.0
_SCALED = {"ReplicaSet": REPLICASETS, "Deployment": DEPLOYMENTS, "StatefulSet": STATEFULSETS,
           "ReplicationController": REPLICATION_CONTROLLERS}


class _SyncFailed(Exception):
    pass


def _ready(pod: Any) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in (pod.get("status") or {}).get("conditions") or ())


def _scaled_value(value: Any, total: int) -> int:
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


class DisruptionController(KeyedController):
    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, name="disruption", queue_name="disruption")
        self.recorder = ctx.recorder("controllermanager")
        self.pdbs = ctx.informers.informer(POD_DISRUPTION_BUDGETS)
        self.pods = ctx.informers.informer(PODS)
        self.wait_for(self.pdbs, self.pods)
        self.pdbs.add_event_handler(on_add=self.enqueue, on_update=lambda o, n: self.enqueue(n), on_delete=self.enqueue)
        self.pods.add_event_handler(on_add=self._pod_changed, on_update=lambda o, n: self._pod_changed(n), on_delete=self._pod_changed)

    def _pod_changed(self, pod: Any) -> None:
        pod = unwrap_tombstone(pod)
        if not pod:
            return
        meta = pod.get("metadata") or {}
        for pdb in self.pdbs.lister.list(namespace=meta.get("namespace")):
            if label_selector_from_dict((pdb.get("spec") or {}).get("selector")).matches(meta.get("labels") or {}):
                self.enqueue(pdb)

    async def sync(self, key: str) -> float | None:
        namespace, name = split_key(key)
        pdb = self.pdbs.lister.try_get(namespace, name)
        if pdb is None:
            return None
        selector = label_selector_from_dict((pdb.get("spec") or {}).get("selector"))
        pods = [p for p in self.pods.lister.list(namespace=namespace) if selector.matches((p.get("metadata") or {}).get("labels") or {})]
        try:
            expected, desired = await self._expected_and_desired(pdb, pods)
        except _SyncFailed as err:
            await self._write(pdb, self._failed_status(pdb, str(err)))
            return None
        now = self.clock.now()
        disrupted, recheck = self._live_disrupted(pdb, pods, now)
        healthy = sum(1 for p in pods if _ready(p) and not p["metadata"].get("deletionTimestamp")
                      and p["metadata"]["name"] not in disrupted)
        allowed = 0 if expected <= 0 else max(0, healthy - desired)
        status = {
            "observedGeneration": pdb["metadata"].get("generation"),
            "disruptionsAllowed": allowed, "currentHealthy": healthy, "desiredHealthy": desired, "expectedPods": expected,
            "conditions": [self._condition(pdb, "True" if allowed > 0 else "False",
                                           "SufficientPods" if allowed > 0 else "InsufficientPods", "")],
        }
        if disrupted:
            status["disruptedPods"] = disrupted
        await self._write(pdb, status)
        return recheck

    async def _expected_and_desired(self, pdb: Any, pods: list[Any]) -> tuple[int, int]:
        spec = pdb.get("spec") or {}
        min_available, max_unavailable = spec.get("minAvailable"), spec.get("maxUnavailable")
        if isinstance(min_available, int) and not isinstance(min_available, bool):
            return len(pods), min_available
        if min_available is None and max_unavailable is None:
            return len(pods), 0
        expected = await self._controllers_scale(pdb, pods)
        if min_available is not None:
            return expected, _scaled_value(min_available, expected)
        return expected, max(0, expected - _scaled_value(max_unavailable, expected))

    async def _controllers_scale(self, pdb: Any, pods: list[Any]) -> int:
        namespace = pdb["metadata"]["namespace"]
        seen: dict[tuple[str, str], int] = {}
        for pod in pods:
            ref = controller_ref(pod)
            if ref is None:
                msg = f"found no controller ref for pod \"{pod['metadata']['name']}\""
                self.recorder.event(pdb, "Warning", "NoControllers", msg, resource=POD_DISRUPTION_BUDGETS)
                raise _SyncFailed(msg)
            kind, name = ref.get("kind") or "", ref.get("name") or ""
            if (kind, name) in seen:
                continue
            resource = _SCALED.get(kind)
            if resource is None:
                raise _SyncFailed(f"found no controllers for pod \"{pod['metadata']['name']}\"")
            try:
                owner = await self.client.get(resource, namespace, name)
            except NotFound as err:
                raise _SyncFailed(f"{kind} {namespace}/{name} not found") from err
            top = controller_ref(owner)
            if kind == "ReplicaSet" and top is not None and top.get("kind") == "Deployment":
                key = ("Deployment", top.get("name") or "")
                if key not in seen:
                    try:
                        owner = await self.client.get(DEPLOYMENTS, namespace, key[1])
                    except NotFound as err:
                        raise _SyncFailed(f"Deployment {namespace}/{key[1]} not found") from err
                    seen[key] = int((owner.get("spec") or {}).get("replicas", 1))
                seen[(kind, name)] = 0
                continue
            seen[(kind, name)] = int((owner.get("spec") or {}).get("replicas", 1))
        return sum(seen.values())

    def _live_disrupted(self, pdb: Any, pods: list[Any], now: Any) -> tuple[dict[str, str], float | None]:
        by_name = {p["metadata"]["name"]: p for p in pods}
        out: dict[str, str] = {}
        recheck: float | None = None
        for name, when in ((pdb.get("status") or {}).get("disruptedPods") or {}).items():
            pod = by_name.get(name)
            at = parse_time(when)
            if pod is None or pod["metadata"].get("deletionTimestamp") or at is None:
                continue
            left = (at + timedelta(seconds=DELETION_TIMEOUT) - now).total_seconds()
            if left <= 0:
                continue
            out[name] = when
            recheck = left if recheck is None else min(recheck, left)
        return out, recheck

    def _condition(self, pdb: Any, status: str, reason: str, message: str) -> dict[str, Any]:
        old = next((c for c in (pdb.get("status") or {}).get("conditions") or () if c.get("type") == "DisruptionAllowed"), None)
        keep = old is not None and old.get("status") == status
        return {"type": "DisruptionAllowed", "status": status, "reason": reason, "message": message,
                "observedGeneration": pdb["metadata"].get("generation"),
                "lastTransitionTime": old.get("lastTransitionTime") if keep and old else format_time(self.clock.now())}

    def _failed_status(self, pdb: Any, message: str) -> dict[str, Any]:
        status = dict(pdb.get("status") or {})
        status.update(observedGeneration=pdb["metadata"].get("generation"), disruptionsAllowed=0,
                      conditions=[self._condition(pdb, "False", "SyncFailed", message)])
        return status

    async def _write(self, pdb: Any, status: dict[str, Any]) -> None:
        current = pdb.get("status") or {}
        if all(current.get(k) == v for k, v in status.items()) and set(current) <= set(status):
            return
        body = dict(pdb, status=status)
        try:
            await self.client.update(POD_DISRUPTION_BUDGETS, body, subresource="status")
        except NotFound:
            return


def new_controller(ctx: ControllerContext) -> DisruptionController:
    return DisruptionController(ctx)
