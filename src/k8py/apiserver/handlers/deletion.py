"""Deletion: DeleteOptions, graceful deletion, finalizers, deletecollection.

Upstream's ``rest.BeforeDelete`` plus ``Store.Delete``:

- preconditions (uid, resourceVersion) are checked first → 409;
- an object whose strategy gives it a grace period (``Strategy.grace_period``:
  a pod bound to a node) is deleted *gracefully*: ``deletionTimestamp`` =
  now + grace period and ``deletionGracePeriodSeconds`` are set and the object
  stays (the kubelet finishes the deletion with grace 0); a pod not bound to a
  node, or already finished, goes at once;
- an object with finalizers (or given ``propagationPolicy`` Orphan /
  Foreground, which add the ``orphan`` / ``foregroundDeletion`` finalizers)
  gets ``deletionTimestamp`` and stays until its finalizers are removed
  (``ObjectStore.guaranteed_update`` deletes it when the last one goes);
- an object whose strategy says the DELETE only begins its termination
  (``Strategy.begin_termination``: a namespace with ``spec.finalizers``) goes
  ``Terminating`` (see ``namespace_lifecycle``); deleting it again meanwhile
  is a 409;
- otherwise it is removed from the store; the reply is the deleted object for
  kinds that return it (pods, services, namespaces) and a ``Status`` otherwise.

With an admission hook, the DELETE is admitted with the stored object as
the old object (NamespaceLifecycle refuses deleting kube-system there).

The reply's second element says whether the object is gone (HTTP 200) or
deletion is pending (HTTP 202), as upstream answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from k8py.api.errors import BadRequest, Cause, Conflict, Invalid, NotFound, success_status
from k8py.apiserver.store.object_meta import rfc3339
from k8py.apiserver.store.admission_hook import AdmissionHook
from k8py.apiserver.store.object_store import ObjectStore, dump_object_async, load_object_async
from k8py.apiserver.registry import ResourceDefinition
from k8py.apiserver.handlers.request_info import query_bool
from k8py.storage import KeyNotFoundError, RevisionConflictError

__all__ = ["DeleteOptions", "parse_delete_options", "delete_object"]

Object = dict[str, Any]

_POLICIES = ("Orphan", "Background", "Foreground")


@dataclass(slots=True)
class DeleteOptions:
    grace_period_seconds: int | None = None
    propagation_policy: str | None = None
    precondition_uid: str | None = None
    precondition_rv: str | None = None
    dry_run: bool = False

    def to_api(self) -> dict[str, Any]:
        """As a meta.k8s.io/v1 DeleteOptions (what admission and webhooks are shown)."""
        out: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"}
        if self.grace_period_seconds is not None:
            out["gracePeriodSeconds"] = self.grace_period_seconds
        if self.precondition_uid or self.precondition_rv:
            out["preconditions"] = {k: v for k, v in (("uid", self.precondition_uid),
                                                      ("resourceVersion", self.precondition_rv)) if v}
        if self.propagation_policy:
            out["propagationPolicy"] = self.propagation_policy
        if self.dry_run:
            out["dryRun"] = ["All"]
        return out


def parse_delete_options(body: Mapping[str, Any] | None, params: Mapping[str, str]) -> DeleteOptions:
    body = body or {}
    opts = DeleteOptions()
    grace = body.get("gracePeriodSeconds", params.get("gracePeriodSeconds"))
    if grace is not None and grace != "":
        try:
            opts.grace_period_seconds = int(grace)
        except (TypeError, ValueError):
            raise BadRequest(f"invalid gracePeriodSeconds: {grace!r}") from None
    policy = body.get("propagationPolicy") or params.get("propagationPolicy")
    orphan = body.get("orphanDependents", params.get("orphanDependents"))
    if orphan is not None and orphan != "":
        orphan_bool = query_bool(orphan)
        if policy:
            raise Invalid.for_object(
                "DeleteOptions",
                "",
                [Cause("FieldValueInvalid", "Invalid value: \"...\": orphanDependents and propagationPolicy cannot both be set", "propagationPolicy")],
                "meta.k8s.io",
            )
        policy = "Orphan" if orphan_bool else "Background"
    if policy and policy not in _POLICIES:
        raise Invalid.for_object(
            "DeleteOptions",
            "",
            [Cause("FieldValueNotSupported", f'Unsupported value: "{policy}": supported values: "Foreground", "Background", "Orphan"', "propagationPolicy")],
            "meta.k8s.io",
        )
    opts.propagation_policy = policy
    pre = body.get("preconditions") or {}
    opts.precondition_uid = pre.get("uid")
    opts.precondition_rv = pre.get("resourceVersion")
    dry = body.get("dryRun") or []
    opts.dry_run = "All" in dry
    return opts


async def delete_object(
    store: ObjectStore,
    definition: ResourceDefinition,
    namespace: str,
    name: str,
    opts: DeleteOptions,
    *,
    admission: AdmissionHook | None = None,
) -> tuple[Object, bool]:
    """Returns (reply body, deleted now). ``admission`` admits the DELETE of the
    object read (after the preconditions, again on each retry), as upstream's
    ``Store.Delete`` runs its delete validation."""
    key = definition.key(namespace, name)
    storage = store.storage
    for _ in range(16):
        kv = await storage.get(key)
        if kv is None:
            raise NotFound.for_object(definition.plural, name, definition.group)
        obj = await load_object_async(definition, kv)
        meta = obj["metadata"]
        if opts.precondition_uid and opts.precondition_uid != meta.get("uid"):
            raise Conflict.for_object(
                definition.kind,
                name,
                f"the UID in the precondition ({opts.precondition_uid}) does not match the UID in record "
                f"({meta.get('uid', '')}). The object might have been deleted and then recreated",
                definition.group,
            )
        if opts.precondition_rv and opts.precondition_rv != meta["resourceVersion"]:
            raise Conflict.for_object(
                definition.kind,
                name,
                f"the ResourceVersion in the precondition ({opts.precondition_rv}) does not match the "
                f"ResourceVersion in record ({meta['resourceVersion']}). The object might have been modified",
                definition.group,
            )
        if admission is not None:
            await admission.delete(obj)
        strategy = definition.strategy
        if strategy.begin_termination(obj):
            # e.g. a namespace: it stays, Terminating, until its content is gone
            new = _mark_deleting(obj, list(meta.get("finalizers") or []), 0, store.clock())
            assert new is not None
            if opts.dry_run:
                return new, False
            try:
                written = await storage.update(key, await _noted(store, definition, key, new), expected_revision=kv.mod_revision)
            except RevisionConflictError:
                continue
            new["metadata"]["resourceVersion"] = str(written.mod_revision)
            return new, False
        grace = strategy.grace_period(obj, opts.grace_period_seconds)
        finalizers = list(meta.get("finalizers") or [])
        if opts.propagation_policy == "Orphan" and "orphan" not in finalizers:
            finalizers.append("orphan")
        elif opts.propagation_policy == "Foreground" and "foregroundDeletion" not in finalizers:
            finalizers.append("foregroundDeletion")
        now = store.clock()
        pending = grace > 0 or bool(finalizers)
        if pending:
            new = _mark_deleting(obj, finalizers, grace, now)
            if new is None:
                return obj, False  # already being deleted, nothing to shorten
            if opts.dry_run:
                return new, False
            try:
                written = await storage.update(key, await _noted(store, definition, key, new), expected_revision=kv.mod_revision)
            except RevisionConflictError:
                continue
            except KeyNotFoundError:
                raise NotFound.for_object(definition.plural, name, definition.group) from None
            new["metadata"]["resourceVersion"] = str(written.mod_revision)
            return new, False
        if opts.dry_run:
            return _reply(definition, obj), True
        try:
            deleted = await storage.delete(key, expected_revision=kv.mod_revision)
        except RevisionConflictError:
            continue
        except KeyNotFoundError:
            raise NotFound.for_object(definition.plural, name, definition.group) from None
        meta["resourceVersion"] = str(deleted.mod_revision)
        return _reply(definition, obj), True
    raise Conflict.for_object(definition.plural, name, "too many concurrent updates; try again", definition.group)


async def _noted(store: Any, definition: ResourceDefinition, key: str, obj: Object) -> bytes:
    """The stored form of ``obj``, told to the store's ``note_stored`` (the
    watch cache's shortcut, see ObjectStore) with no await in between."""
    value = await dump_object_async(definition, obj)
    if store.note_stored is not None:
        store.note_stored(definition, key, value, obj)
    return value


def _mark_deleting(obj: Object, finalizers: list[str], grace: int, now: float) -> Object | None:
    """The object with deletion marked, or None if nothing would change."""
    meta = obj["metadata"]
    current_grace = meta.get("deletionGracePeriodSeconds")
    if meta.get("deletionTimestamp"):
        changed = False
        if finalizers != list(meta.get("finalizers") or []):
            meta["finalizers"] = finalizers
            changed = True
        if current_grace is not None and grace < int(current_grace):
            meta["deletionTimestamp"] = rfc3339(now + grace)
            meta["deletionGracePeriodSeconds"] = grace
            changed = True
        return obj if changed else None
    meta["deletionTimestamp"] = rfc3339(now + grace)
    meta["deletionGracePeriodSeconds"] = grace
    if finalizers:
        meta["finalizers"] = finalizers
    return obj


def _reply(definition: ResourceDefinition, obj: Object) -> Object:
    if definition.strategy.return_deleted_object:
        return obj
    meta = obj["metadata"]
    return success_status(
        name=meta.get("name", ""), group=definition.group, kind=definition.plural, uid=meta.get("uid", "")
    )
