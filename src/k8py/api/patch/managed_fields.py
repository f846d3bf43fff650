"""``metadata.managedFields``: decode, encode and identify manager entries.

Each entry records the fields one *manager* owns through one kind of
operation::

    {"manager": "kubectl", "operation": "Apply", "apiVersion": "apps/v1",
     "time": "2025-01-01T00:00:00Z", "fieldsType": "FieldsV1",
     "fieldsV1": {...}, "subresource": "status"}

Identity (upstream ``BuildManagerIdentifier``): manager, operation and
subresource, plus ``apiVersion`` for ``Update`` entries only — an applier keeps
one entry across versions, an updater gets one per version. Entries are written
sorted as upstream sorts them: operation, time, manager, apiVersion,
subresource. Fields that no manager may own (``apiVersion``, ``kind``, and the
server-owned metadata such as ``name``, ``uid``, ``resourceVersion``,
``managedFields``) are stripped from every set (upstream ``stripmeta``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from k8py.api.patch import field_set as fs

__all__ = [
    "ManagerId",
    "Managers",
    "decode_managed_fields",
    "encode_managed_fields",
    "strip",
    "manager_label",
]

_STRIPPED: frozenset[fs.Path] = frozenset(
    [("f:apiVersion",), ("f:kind",), ("f:metadata",)]
    + [
        ("f:metadata", f"f:{name}")
        for name in (
            "name",
            "namespace",
            "creationTimestamp",
            "selfLink",
            "uid",
            "clusterName",
            "generation",
            "managedFields",
            "resourceVersion",
        )
    ]
)


@dataclass(frozen=True, slots=True)
class ManagerId:
    manager: str
    operation: str  # Apply | Update
    api_version: str = ""  # only part of the identity for Update
    subresource: str = ""


@dataclass(slots=True)
class ManagerEntry:
    api_version: str
    time: str
    fields: set[fs.Path] = field(default_factory=set)


Managers = dict[ManagerId, ManagerEntry]


def strip(paths: Iterable[fs.Path], ignored: Iterable[fs.Path] = ()) -> set[fs.Path]:
    """Drop server-owned fields and anything under an ``ignored`` prefix."""
    prefixes = tuple(ignored)
    out = set()
    for path in paths:
        if path in _STRIPPED:
            continue
        if path[:2] == ("f:metadata", "f:managedFields"):
            continue
        if any(path[: len(p)] == p for p in prefixes):
            continue
        out.add(path)
    return out


def decode_managed_fields(entries: Any) -> Managers:
    """Parse ``metadata.managedFields``; malformed entries are ignored."""
    managers: Managers = {}
    if not isinstance(entries, list):
        return managers
    for entry in entries:
        if not isinstance(entry, dict) or not entry.get("manager"):
            continue
        operation = entry.get("operation") or "Update"
        api_version = entry.get("apiVersion") or ""
        ident = ManagerId(
            entry["manager"],
            operation,
            api_version if operation == "Update" else "",
            entry.get("subresource") or "",
        )
        paths = set(fs.from_fields_v1(entry.get("fieldsV1")))
        current = managers.get(ident)
        if current is None:
            managers[ident] = ManagerEntry(api_version, entry.get("time") or "", paths)
        else:
            current.fields |= paths
    return managers


def encode_managed_fields(managers: Managers) -> list[dict[str, Any]]:
    entries = []
    for ident, entry in managers.items():
        if not entry.fields:
            continue
        out: dict[str, Any] = {"manager": ident.manager, "operation": ident.operation}
        if entry.api_version:
            out["apiVersion"] = entry.api_version
        if entry.time:
            out["time"] = entry.time
        out["fieldsType"] = "FieldsV1"
        out["fieldsV1"] = fs.to_fields_v1(entry.fields)
        if ident.subresource:
            out["subresource"] = ident.subresource
        entries.append(out)
    entries.sort(
        key=lambda e: (
            e["operation"],
            e.get("time", ""),
            e["manager"],
            e.get("apiVersion", ""),
            e.get("subresource", ""),
        )
    )
    return entries


def manager_label(ident: ManagerId, api_version: str) -> str:
    """How upstream names a manager in conflict messages (``printManager``)."""
    label = f'"{ident.manager}"'
    if ident.subresource:
        label += f' with subresource "{ident.subresource}"'
    if ident.operation == "Update":
        label += f" using {api_version}"
    return label
