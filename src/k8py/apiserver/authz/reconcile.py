"""Reconciling the bootstrap policy at API server start (upstream's ``storage_rbac`` post-start hook).

For every bootstrap role and binding (:mod:`.bootstrap_policy`):

- missing: created;
- present and annotated ``rbac.authorization.kubernetes.io/autoupdate: "false"``:
  left alone (an administrator took it over);
- present otherwise: missing rules, aggregation selectors, subjects, labels
  and annotations are added — never removed (upstream reconciles with
  ``removeExtraPermissions=false``) — and written only when something was
  missing, so a restart writes nothing;
- a binding whose ``roleRef`` differs is deleted and created again (roleRef
  is immutable).

Runs as the server itself (no request user), so the escalation checks do not
apply, as upstream's hook writes through the privileged loopback client.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

from k8py.api.errors import AlreadyExists, NotFound
from k8py.apiserver.authz.bootstrap_policy import (cluster_role_bindings, cluster_roles, namespace_role_bindings,
                                                   namespace_roles)
from k8py.apiserver.authz.policy_rules import AUTOUPDATE
from k8py.apiserver.authz.rules import uncovered
from k8py.apiserver.registry import Registry, ResourceDefinition
from k8py.apiserver.store.object_store import ObjectStore

__all__ = ["reconcile_bootstrap_policy", "merge_role", "merge_binding"]

log = logging.getLogger(__name__)
Object = dict[str, Any]
#: (definition, namespace, name) -> True when that object is known not to be stored
Absent = Callable[[ResourceDefinition, str, str], bool]
GROUP = "rbac.authorization.k8s.io"


def _merge_meta(existing: Object, wanted: Object) -> bool:
    meta = existing.setdefault("metadata", {})
    changed = False
    for field in ("labels", "annotations"):
        have = meta.get(field) or {}
        for k, v in (wanted["metadata"].get(field) or {}).items():
            if k not in have:
                have[k] = v
                changed = True
        if have:
            meta[field] = have
    return changed


def merge_role(existing: Object, wanted: Object) -> bool:
    """Add to ``existing`` (in place) what ``wanted`` has and it lacks; True if anything was added."""
    changed = _merge_meta(existing, wanted)
    if "aggregationRule" in wanted:
        rule = existing.setdefault("aggregationRule", {})
        selectors = rule.setdefault("clusterRoleSelectors", [])
        for selector in wanted["aggregationRule"]["clusterRoleSelectors"]:
            if selector not in selectors:
                selectors.append(selector)
                changed = True
        return changed  # the aggregation controller owns the rules of an aggregated role
    rules = existing.get("rules") or []
    missing = [r for r in wanted.get("rules") or [] if uncovered(rules, [r])]
    if missing:
        existing["rules"] = rules + missing
        changed = True
    return changed


def merge_binding(existing: Object, wanted: Object) -> bool:
    changed = _merge_meta(existing, wanted)
    subjects = existing.get("subjects") or []
    for subject in wanted.get("subjects") or []:
        if subject not in subjects:
            subjects.append(subject)
            changed = True
    if subjects:
        existing["subjects"] = subjects
    return changed


async def _reconcile_one(store: ObjectStore, definition: ResourceDefinition, wanted: Object, *, binding: bool,
                         absent: Absent) -> str:
    meta = wanted["metadata"]
    namespace, name = meta.get("namespace", ""), meta["name"]
    try:
        if absent(definition, namespace, name):
            raise NotFound.for_object(definition.plural, name, definition.group)
        existing = await store.get(definition, namespace, name)
    except NotFound:
        try:
            await store.create(definition, namespace, wanted)
        except AlreadyExists:
            return "raced"
        return "created"
    if ((existing.get("metadata") or {}).get("annotations") or {}).get(AUTOUPDATE) == "false":
        return "kept"
    if binding and existing.get("roleRef") != wanted.get("roleRef"):
        await store.storage.delete(definition.key(namespace, name))
        await store.create(definition, namespace, wanted)
        return "recreated"
    merge = merge_binding if binding else merge_role
    if not merge(existing, wanted):
        return "unchanged"

    def mutate(current: Object) -> Object:
        merge(current, wanted)
        return current

    await store.guaranteed_update(definition, namespace, name, mutate)
    return "updated"


def _not_known(_definition: ResourceDefinition, _namespace: str, _name: str) -> bool:
    return False


async def reconcile_bootstrap_policy(registry: Registry, store: ObjectStore, *, absent: Absent = _not_known) -> dict[str, int]:
    """Bring the bootstrap policy into the store; returns how many objects had each outcome.
    ``absent(definition, namespace, name)``: True when the object is known not to be
    stored (the server's watch cache, loaded just before): it is created without a
    read first (a fresh store's ~130 reads, each a trip to the store's reader
    thread, on the way to the server's first answer); a create that then finds
    it there after all counts as ``raced``, as before."""
    outcomes: dict[str, int] = {}
    plan = [("clusterroles", cluster_roles(), False), ("clusterrolebindings", cluster_role_bindings(), True),
            ("roles", namespace_roles(), False), ("rolebindings", namespace_role_bindings(), True)]
    writes = []
    for plural, objects, binding in plan:
        definition = registry.get(GROUP, "v1", plural)
        assert definition is not None, plural
        writes.extend(_reconcile_one(store, definition, obj, binding=binding, absent=absent) for obj in objects)
    # concurrently (a binding may precede its role): the store commits the writes in groups,
    # and a first start writes ~130 objects
    for outcome in await asyncio.gather(*writes):
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    log.info("bootstrap RBAC policy reconciled", extra={"outcomes": outcomes})
    return outcomes
