"""Controller ownerReferences: reading them, building them, matching them.

An object has at most one *controller* reference (``controller: true``); that
owner is the one that manages it (apimachinery's ``GetControllerOf``). The
helpers here only read and build dicts; they never write to the API.
"""

from __future__ import annotations

from typing import Any, Mapping

from k8py.client.resource import Resource

__all__ = ["controller_ref", "new_controller_ref", "is_controlled_by", "owner_references"]


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
