"""The namespace controller: a deleted namespace loses its content, then its
``kubernetes`` finalizer (upstream ``namespace_controller`` and
``namespaced_resources_deleter``).

The API server marks a deleted namespace ``Terminating`` and refuses new
content in it; this controller does the rest. One ``sync(name)``:

1. read the namespace from the API server (the cache may lag); nothing to do
   unless it has a deletionTimestamp and still the ``kubernetes`` finalizer;
2. for every namespaced resource discovery lists with ``delete`` (so custom
   resources too): DELETE the collection (``propagationPolicy:
   Background``), or each object where ``deletecollection`` is not served;
   then list what remains and which finalizers hold it;
3. record the NamespaceDeletionDiscoveryFailure,
   NamespaceDeletionGroupVersionParsingFailure,
   NamespaceDeletionContentFailure, NamespaceContentRemaining and
   NamespaceFinalizersRemaining conditions as upstream words them;
4. with content remaining, look again after the estimate (the longest pod
   grace period, at least :data:`REMAINING_RECHECK` seconds); with none,
   ``PUT /finalize`` without ``kubernetes``: the API server then deletes the
   namespace.
"""

from __future__ import annotations

import logging
from typing import Any

from k8py.api.errors import Conflict, NotFound, StatusError
from k8py.client.resource import Resource
from k8py.client.resources import NAMESPACES
from k8py.controllers.context import ControllerContext
from k8py.controllers.keyed_controller import KeyedController
from k8py.controllers.object_meta import meta as _meta
from k8py.controllers.pod_status import format_time

__all__ = ["NamespaceController", "new_controller", "REMAINING_RECHECK"]

logger = logging.getLogger(__name__)

FINALIZER = "kubernetes"
REMAINING_RECHECK = 0.5
"""Seconds before looking again at a namespace whose content is still going."""

_CONDITION_TYPES = ("NamespaceDeletionDiscoveryFailure", "NamespaceDeletionGroupVersionParsingFailure",
                    "NamespaceDeletionContentFailure", "NamespaceContentRemaining", "NamespaceFinalizersRemaining")
_CLEARED = {
    "NamespaceDeletionDiscoveryFailure": ("ResourcesDiscovered", "All resources successfully discovered"),
    "NamespaceDeletionGroupVersionParsingFailure": ("ParsedGroupVersions", "All legacy kube types successfully parsed"),
    "NamespaceDeletionContentFailure": ("ContentDeleted", "All content successfully deleted, may be waiting on finalization"),
    "NamespaceContentRemaining": ("ContentRemoved", "All content successfully removed"),
    "NamespaceFinalizersRemaining": ("ContentHasNoFinalizers", "All content-preserving finalizers finished"),
}


class NamespaceController(KeyedController):
    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, name="namespace", queue_name="namespace")
        self.informer = ctx.informers.informer(NAMESPACES)
        self.wait_for(self.informer)
        self.informer.add_event_handler(on_add=self._changed, on_update=lambda old, new: self._changed(new),
                                        resync_period=ctx.options.namespace_sync_period)

    def _changed(self, ns: Any) -> None:
        if _meta(ns).get("deletionTimestamp"):
            self.enqueue(ns)

    async def sync(self, name: str) -> float | None:
        try:
            ns = await self.client.get(NAMESPACES, None, name)
        except NotFound:
            return None
        meta = _meta(ns)
        if not meta.get("deletionTimestamp") or FINALIZER not in ((ns.get("spec") or {}).get("finalizers") or ()):
            return None
        conditions: dict[str, tuple[str, str, str]] = {}
        try:
            resources = await self._deletable_resources()
        except Exception as err:  # noqa: BLE001 - reported in the condition, retried by the loop
            conditions["NamespaceDeletionDiscoveryFailure"] = ("True", "DiscoveryFailed", f"Discovery failed for some groups: {err}")
            await self._update_conditions(ns, conditions)
            raise
        remaining: dict[str, int] = {}
        finalizers: dict[str, int] = {}
        errors: list[str] = []
        estimate = 0.0
        for resource, verbs in resources:
            try:
                left, held, wait = await self._delete_content(resource, verbs, name)
            except StatusError as err:
                errors.append(str(err.message or err))
                continue
            if left:
                remaining[f"{resource.plural}.{resource.group}"] = left
            for f, n in held.items():
                finalizers[f] = finalizers.get(f, 0) + n
            estimate = max(estimate, wait)
        if errors:
            conditions["NamespaceDeletionContentFailure"] = (
                "True", "ContentDeletionFailed", f"Failed to delete all resource types, {len(errors)} remaining: {'; '.join(errors)}")
        if remaining:
            detail = ", ".join(f"{k} has {v} resource instances" for k, v in sorted(remaining.items()))
            conditions["NamespaceContentRemaining"] = ("True", "SomeResourcesRemain", f"Some resources are remaining: {detail}")
        if finalizers:
            detail = ", ".join(f"{k} in {v} resource instances" for k, v in sorted(finalizers.items()))
            conditions["NamespaceFinalizersRemaining"] = (
                "True", "SomeFinalizersRemain", f"Some content in the namespace has finalizers remaining: {detail}")
        ns = await self._update_conditions(ns, conditions)
        if errors:
            raise RuntimeError(f"namespace {name}: content deletion failed: {'; '.join(errors)}")
        if remaining:
            return max(estimate, REMAINING_RECHECK)
        await self._finalize(ns)
        return None

    async def _deletable_resources(self) -> list[tuple[Resource, tuple[str, ...]]]:
        discovery = self.client.discovery
        discovery.invalidate()
        seen: set[tuple[str, str]] = set()
        out = []
        for info in await discovery.server_resources():
            r = info.resource
            if not r.namespaced or not info.preferred or "delete" not in info.verbs or "list" not in info.verbs:
                continue
            if (r.group, r.plural) in seen:
                continue
            seen.add((r.group, r.plural))
            out.append((r, info.verbs))
        return out

    async def _delete_content(self, resource: Resource, verbs: tuple[str, ...], namespace: str) -> tuple[int, dict[str, int], float]:
        """Delete everything of ``resource`` in ``namespace``; (remaining, finalizers holding them, seconds to wait)."""
        if "deletecollection" in verbs:
            await self.client.delete_collection(resource, namespace, propagation_policy="Background")
        else:
            for item in (await self.client.list(resource, namespace)).get("items") or ():
                if _meta(item).get("deletionTimestamp"):
                    continue
                try:
                    await self.client.delete(resource, namespace, _meta(item)["name"], propagation_policy="Background")
                except NotFound:
                    pass
        items = (await self.client.list(resource, namespace)).get("items") or ()
        held: dict[str, int] = {}
        wait = 0.0
        for item in items:
            for f in _meta(item).get("finalizers") or ():
                held[f] = held.get(f, 0) + 1
            grace = _meta(item).get("deletionGracePeriodSeconds")
            if grace:
                wait = max(wait, float(grace))
        return len(items), held, wait

    async def _update_conditions(self, ns: dict[str, Any], failing: dict[str, tuple[str, str, str]]) -> dict[str, Any]:
        status = dict(ns.get("status") or {})
        old = {c.get("type"): c for c in status.get("conditions") or ()}
        now = format_time(self.clock.now())
        conditions = [c for c in status.get("conditions") or () if c.get("type") not in _CONDITION_TYPES]
        for kind in _CONDITION_TYPES:
            state, reason, message = failing.get(kind) or ("False", *_CLEARED[kind])
            prior = old.get(kind)
            if prior is not None and prior.get("status") == state and prior.get("reason") == reason and prior.get("message") == message:
                conditions.append(prior)
                continue
            conditions.append({"type": kind, "status": state, "lastTransitionTime": now, "reason": reason, "message": message})
        if conditions == list(status.get("conditions") or ()):
            return ns
        body = {**ns, "status": {**status, "conditions": conditions}}
        try:
            return await self.client.update_status(NAMESPACES, body)
        except Conflict:
            return await self.client.get(NAMESPACES, None, _meta(ns)["name"])

    async def _finalize(self, ns: dict[str, Any]) -> None:
        spec = dict(ns.get("spec") or {})
        spec["finalizers"] = [f for f in spec.get("finalizers") or () if f != FINALIZER]
        try:
            await self.client.update(NAMESPACES, {**ns, "spec": spec}, subresource="finalize")
        except NotFound:
            return
        logger.info("namespace finalized", extra={"namespace": _meta(ns).get("name")})


def new_controller(ctx: ControllerContext) -> NamespaceController:
    return NamespaceController(ctx)
