"""What the upstream schema says about each field, for the patch engines.

Strategic merge patch and server-side apply both walk an object alongside its
OpenAPI definition (:mod:`k8py.api.schema`). This module answers the two
questions they ask at each step, and nothing else:

* for strategic merge patch, a field's ``x-kubernetes-patch-strategy``
  (``merge``, ``replace``, ``retainKeys``, comma-separated) and
  ``x-kubernetes-patch-merge-key``;
* for server-side apply, the field's *shape*: scalar, struct (declared
  properties), map (``additionalProperties``), list with its
  ``x-kubernetes-list-type`` (``atomic``/``set``/``map`` + map keys), atomic
  maps (``x-kubernetes-map-type: atomic``), or *deduced* when there is no
  schema (custom resources without one, ``RawExtension``): deduced values are
  granular maps and atomic lists, as structured-merge-diff's deduced type.

A "field schema" is the property schema *before* ``$ref`` resolution, since the
vendor extensions sit next to the ``$ref``; :func:`resolved` follows it.
Lists without ``x-kubernetes-list-type`` take it from their patch strategy
(merge + key → map, merge → set), otherwise atomic, as upstream converts them.
``None`` stands for "no schema here" throughout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from k8py.api import schema as api_schema

__all__ = [
    "Schema",
    "Shape",
    "root_schema",
    "resolved",
    "field_schema",
    "items_schema",
    "patch_meta",
    "shape_of",
]

Schema = dict[str, Any]


def root_schema(schema_name: str | None) -> Schema | None:
    if not schema_name:
        return None
    found = api_schema.definition(schema_name)
    return found if isinstance(found, dict) else None


def resolved(field: Schema | None) -> Schema | None:
    return api_schema.resolve(field) if field is not None else None


def _extension(field: Schema | None, name: str) -> Any:
    """A vendor extension on the field, else on the definition it refers to."""
    if field is None:
        return None
    if name in field:
        return field[name]
    target = resolved(field)
    return target.get(name) if target is not None else None


def field_schema(parent: Schema | None, key: str) -> Schema | None:
    """The schema of member ``key`` of an object whose field schema is ``parent``."""
    target = resolved(parent)
    if target is None:
        return None
    props = target.get("properties")
    if props and isinstance(props.get(key), dict):
        found: Schema = props[key]
        return found
    extra = target.get("additionalProperties")
    if isinstance(extra, dict):
        return extra
    return None


def items_schema(field: Schema | None) -> Schema | None:
    target = resolved(field)
    if target is None:
        return None
    items = target.get("items")
    return items if isinstance(items, dict) else None


def patch_meta(field: Schema | None) -> tuple[list[str], str]:
    """``(strategies, merge_key)`` for strategic merge patch; empty when unknown."""
    strategy = _extension(field, "x-kubernetes-patch-strategy") or ""
    merge_key = _extension(field, "x-kubernetes-patch-merge-key") or ""
    strategies = [s for s in strategy.split(",") if s] if isinstance(strategy, str) else []
    return strategies, merge_key if isinstance(merge_key, str) else ""


@dataclass(frozen=True, slots=True)
class Shape:
    """How server-side apply treats a field."""

    kind: str  # scalar | struct | map | list | deduced
    atomic: bool = False
    list_type: str = "atomic"  # for lists: atomic | set | map
    keys: tuple[str, ...] = ()
    declared: frozenset[str] = frozenset()  # struct: declared property names


_SCALARS = {"string", "integer", "number", "boolean"}


def shape_of(field: Schema | None) -> Shape:
    target = resolved(field)
    if target is None:
        return Shape("deduced")
    kind = api_schema.schema_type(target)
    if kind == "array" or "items" in target:
        list_type = _extension(field, "x-kubernetes-list-type")
        keys = tuple(_extension(field, "x-kubernetes-list-map-keys") or ())
        if not list_type:
            strategies, merge_key = patch_meta(field)
            if "merge" in strategies:
                list_type, keys = ("map", (merge_key,)) if merge_key else ("set", ())
            else:
                list_type = "atomic"
        if list_type == "map" and not keys:
            list_type = "atomic"
        return Shape("list", atomic=list_type == "atomic", list_type=list_type, keys=keys)
    if kind in _SCALARS or "oneOf" in target or "anyOf" in target:
        return Shape("scalar")
    props = target.get("properties")
    extra = target.get("additionalProperties")
    atomic = _extension(field, "x-kubernetes-map-type") == "atomic"
    if props:
        return Shape("struct", atomic=atomic, declared=frozenset(props))
    if isinstance(extra, dict) or extra is True:
        return Shape("map", atomic=atomic)
    if atomic:
        return Shape("map", atomic=True)
    return Shape("deduced")
