"""Canonical timestamps: ``metav1.Time`` and ``MicroTime`` fields as Go writes them.

Upstream decodes every request into Go types and encodes them again, so a
timestamp sent as ``2026-11-30T08:00:00+00:00`` (what the official Python
client sends for a UTC ``datetime``) is stored as ``2026-11-30T08:00:00Z``,
and a MicroTime as ``2026-11-30T08:00:00.000000Z``. Clients depend on that:
kubectl's decoder rejects a MicroTime without its six fraction digits.

k8py stores JSON as it comes, so this module rewrites the time fields of a
body to the canonical forms. Which fields are times comes from the upstream
schema (``$ref`` to ``...meta.v1.Time`` / ``...meta.v1.MicroTime``),
compiled once per kind into a map of just the paths that lead to a time. The
work is skipped unless the raw body holds a time with an explicit UTC offset
or a fraction (a regex search over the bytes).
"""

from __future__ import annotations

import functools
import re
from datetime import datetime, timezone
from typing import Any

from k8py.api import schema as upstream

__all__ = ["needs_normalizing", "normalize_times"]

_TIME = "io.k8s.apimachinery.pkg.apis.meta.v1.Time"
_MICRO = "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"
_SUSPECT = re.compile(rb'T\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:\d\d|\.\d+Z)"')
_MAX_DEPTH = 12

#: a compiled map: field -> "time" | "micro" | nested map; "[]" marks list items
TimeMap = dict[str, Any]


def needs_normalizing(raw: bytes) -> bool:
    return _SUSPECT.search(raw) is not None


def _ref(node: dict[str, Any]) -> str | None:
    name = upstream.ref_name(node)
    if name is None:
        all_of = node.get("allOf")
        if all_of and len(all_of) == 1:
            name = upstream.ref_name(all_of[0])
    return name


def _compile(node: dict[str, Any] | None, depth: int, seen: frozenset[str]) -> Any:
    if node is None or depth > _MAX_DEPTH:
        return None
    name = _ref(node)
    if name == _TIME:
        return "time"
    if name == _MICRO:
        return "micro"
    if name is not None:
        if name in seen:
            return None
        seen = seen | {name}
        node = upstream.definition(name)
        if node is None:
            return None
    out: TimeMap = {}
    for key, prop in (node.get("properties") or {}).items():
        child = _compile(prop, depth + 1, seen)
        if child is not None:
            out[key] = child
    items = node.get("items")
    if isinstance(items, dict):
        child = _compile(items, depth + 1, seen)
        if child is not None:
            out["[]"] = child
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        child = _compile(extra, depth + 1, seen)
        if child is not None:
            out["{}"] = child
    return out or None


@functools.lru_cache(maxsize=256)
def _time_map(schema_name: str) -> TimeMap | None:
    return _compile({"$ref": f"#/$defs/{schema_name}"}, 0, frozenset())


_CANONICAL_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ").fullmatch
_CANONICAL_MICRO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z").fullmatch


def _canonical(value: Any, micro: bool) -> Any:
    if not isinstance(value, str) or not value:
        return value
    if (_CANONICAL_MICRO if micro else _CANONICAL_TIME)(value):
        return value  # already as Go writes it (a renewed Lease's every write): nothing to parse
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith("Z") else value)
    except ValueError:
        return value  # validation reports malformed times; leave them be
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    parsed = parsed.astimezone(timezone.utc)
    return parsed.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")


def _apply(tmap: Any, value: Any) -> Any:
    if tmap == "time" or tmap == "micro":
        return _canonical(value, tmap == "micro")
    if isinstance(value, dict):
        if "{}" in tmap:
            for key in value:
                value[key] = _apply(tmap["{}"], value[key])
        for key, sub in tmap.items():
            if key in ("[]", "{}"):
                continue
            if key in value and value[key] is not None:
                value[key] = _apply(sub, value[key])
    elif isinstance(value, list) and "[]" in tmap:
        for i, item in enumerate(value):
            value[i] = _apply(tmap["[]"], item)
    return value


def normalize_times(schema_name: str | None, obj: dict[str, Any]) -> None:
    """Rewrite ``obj``'s time fields in place to Go's canonical forms."""
    if not schema_name:
        return
    tmap = _time_map(schema_name)
    if tmap is not None:
        _apply(tmap, obj)
