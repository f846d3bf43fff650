"""Controller ownerReferences: reading them, building them, matching them.

An object has at most one *controller* reference (``controller: true``); that
owner is the one that manages it (apimachinery's ``GetControllerOf``). The
helpers here only read and build dicts; they never write to the API.
"""

from __future__ import annotations

from typing import Any, Mapping

from k8py.client.resource import Resource

__all__ = [
    "controller_ref", "new_controller_ref", "is_controlled_by", "owner_references",
    "CONTROLLER_UID_INDEX", "index_by_controller_uid", "ensure_controller_uid_index", "owned_or_orphaned",
]

CONTROLLER_UID_INDEX = "controllerUID"
"""Index of a shared informer: controller uid -> objects, and ``<namespace>/_ORPHAN`` -> orphans
(upstream ``controllerUIDIndex``), so a sync reads only the candidates it may claim."""
_ORPHAN = "_ORPHAN"


def owner_references(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list((obj.get("metadata") or {}).get("ownerReferences") or ())


def controller_ref(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ownerReference with ``controller: true``, or ``None``."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return ref
    return None


def new_controller_ref(owner: Mapping[str, Any], resource: Resource) -> dict[str, Any]:
    """A controller reference to ``owner`` (``blockOwnerDeletion`` set, as upstream)."""
    meta = owner.get("metadata") or {}
    return {
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def is_controlled_by(obj: Mapping[str, Any], owner: Mapping[str, Any]) -> bool:
    ref = controller_ref(obj)
    return ref is not None and ref.get("uid") == (owner.get("metadata") or {}).get("uid")


def index_by_controller_uid(obj: Mapping[str, Any]) -> list[str]:
    ref = controller_ref(obj)
    if ref is not None and ref.get("uid"):
        return [ref["uid"]]
    return [f"{(obj.get('metadata') or {}).get('namespace') or ''}/{_ORPHAN}"]


def ensure_controller_uid_index(informer: Any) -> None:
    """Add :data:`CONTROLLER_UID_INDEX` to a shared informer once (several controllers share it)."""
    if CONTROLLER_UID_INDEX not in informer.indexer.get_indexers():
        informer.add_indexers({CONTROLLER_UID_INDEX: index_by_controller_uid})


def owned_or_orphaned(informer: Any, owner: Mapping[str, Any]) -> list[Any]:
    """The cached objects ``owner`` controls, plus the orphans of its namespace."""
    meta = owner.get("metadata") or {}
    indexer = informer.indexer
    return [*indexer.by_index(CONTROLLER_UID_INDEX, meta.get("uid") or ""),
            *indexer.by_index(CONTROLLER_UID_INDEX, f"{meta.get('namespace') or ''}/{_ORPHAN}")]
