"""Object metadata the server owns: uid, timestamps, generation, names.

Upstream's ``rest.BeforeCreate`` / ``BeforeUpdate`` / ``FillObjectMetaSystemFields``:
what a client may not set (or change), and what the server fills in. Pure
functions on dicts, so the generic object store stays readable.
"""

from __future__ import annotations

import os
import re
import time
from datetime import datetime, timezone
from typing import Any, Callable

from k8py.api import names
from k8py.api.errors import BadRequest, Cause, Invalid, StatusError
from k8py.apiserver.registry import ResourceDefinition

__all__ = [
    "rfc3339",
    "prepare_meta_for_create",
    "carry_meta_for_update",
    "validate_meta",
    "NAME_VALIDATORS",
]

Object = dict[str, Any]

NAME_VALIDATORS: dict[str, Callable[..., list[str]]] = {
    "subdomain": names.name_is_dns_subdomain,
    "label": names.name_is_dns_label,
    "dns1035": names.name_is_dns1035_label,
    "path": names.name_is_path_segment,
}

#: kinds whose names are DNS labels rather than subdomains (upstream validation)
_NAME_RULES = {("", "Namespace"): "label", ("", "Service"): "dns1035",
               ("apiregistration.k8s.io", "APIService"): "path",  # "v1." is the core group's
               # RBAC names are path segments (system:node, system:controller:job)
               **{("rbac.authorization.k8s.io", kind): "path" for kind in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")}}


_last_second: list[Any] = [None, ""]


def rfc3339(ts: float | None = None) -> str:
    """``2026-11-30T07:50:00Z``: seconds precision, as metav1.Time marshals."""
    second = int(time.time() if ts is None else ts)
    if _last_second[0] != second:  # formatting costs more than the cache
        _last_second[0] = second
        _last_second[1] = datetime.fromtimestamp(second, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return _last_second[1]


class _UidSource:
    """Random (version 4) UIDs from the OS's CSPRNG, 256 at a time: one
    getrandom() per UID was a measurable part of a create, and so was
    ``str(uuid.UUID(...))``: each UID is cut from one hex string of the pool,
    the version nibble set to 4 and the variant bits to 10 (RFC 4122), the
    same string ``uuid.UUID(bytes=raw, version=4)`` prints."""

    _VARIANT = {c: "89ab"[int(c, 16) & 3] for c in "0123456789abcdef"}

    def __init__(self) -> None:
        self._pool = ""
        self._offset = 0

    def new(self) -> str:
        if self._offset >= len(self._pool):
            self._pool = os.urandom(16 * 256).hex()
            self._offset = 0
        h = self._pool[self._offset : self._offset + 32]
        self._offset += 32
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{self._VARIANT[h[16]]}{h[17:20]}-{h[20:]}"


new_uid = _UidSource().new


def _meta(obj: Object) -> Object:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = obj["metadata"] = {}
    return meta


_UINT = re.compile(r"[0-9]+")
_UINT64_MAX = 2**64 - 1


def parse_resource_version(rv: str) -> int:
    """A resourceVersion as upstream's ``APIObjectVersioner.ParseResourceVersion``
    reads it: "" and "0" are 0 (none), otherwise an unsigned 64-bit integer.
    Anything else fails as upstream's update path fails on it: a 500 whose
    message names the field (upstream returns the storage InvalidError as is)."""
    if rv in ("", "0"):
        return 0
    if isinstance(rv, str) and _UINT.fullmatch(rv):
        value = int(rv)
        if value <= _UINT64_MAX:
            return value
        problem = "value out of range"
    else:
        problem = "invalid syntax"
    raise StatusError(f'resourceVersion: Invalid value: "{rv}": strconv.ParseUint: parsing "{rv}": {problem}')


def _parses_to_nonzero(rv: object) -> bool:
    try:
        return parse_resource_version(rv) != 0  # type: ignore[arg-type]
    except StatusError:
        return False


def prepare_meta_for_create(
    definition: ResourceDefinition, obj: Object, namespace: str, *, now: float
) -> None:
    """System fields of a new object; checks the namespace against the URL."""
    meta = _meta(obj)
    if definition.namespaced:
        body_ns = meta.get("namespace") or ""
        if body_ns and namespace and body_ns != namespace:
            raise BadRequest(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        meta["namespace"] = body_ns or namespace
    else:
        meta.pop("namespace", None)
    rv = meta.pop("resourceVersion", None)
    if rv and _parses_to_nonzero(rv):
        # upstream refuses only a version its versioner can parse; anything
        # else ("v1") is cleared and the object created
        raise BadRequest("resourceVersion should not be set on objects to be created")
    if not meta.get("name") and meta.get("generateName"):
        # generateName is used only when name is empty (upstream BeforeCreate)
        meta["name"] = names.generate_name(meta["generateName"])
    meta["uid"] = new_uid()
    meta["creationTimestamp"] = rfc3339(now)
    meta.pop("deletionTimestamp", None)
    meta.pop("deletionGracePeriodSeconds", None)
    meta.pop("selfLink", None)
    if definition.strategy.tracks_generation:
        meta["generation"] = 1
    else:
        meta.pop("generation", None)


def carry_meta_for_update(definition: ResourceDefinition, obj: Object, old: Object) -> None:
    """Fields a client cannot change on update are copied from the stored object."""
    meta = _meta(obj)
    old_meta = old.get("metadata") or {}
    for key in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"):
        if key in old_meta:
            meta[key] = old_meta[key]
        else:
            meta.pop(key, None)
    if definition.namespaced:
        meta["namespace"] = old_meta.get("namespace", "")
    meta.pop("selfLink", None)
    if "generateName" not in meta and "generateName" in old_meta:
        meta["generateName"] = old_meta["generateName"]


def validate_meta(definition: ResourceDefinition, obj: Object) -> list[Cause]:
    rule = _NAME_RULES.get((definition.group, definition.kind), "subdomain")
    return names.validate_object_meta(
        obj.get("metadata"), namespaced=definition.namespaced, name_validator=NAME_VALIDATORS[rule]
    )


def raise_if_invalid(definition: ResourceDefinition, obj: Object, causes: list[Cause]) -> None:
    if causes:
        name = (obj.get("metadata") or {}).get("name", "")
        raise Invalid.for_object(definition.kind, name, causes, definition.group)
