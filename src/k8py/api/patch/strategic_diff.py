"""Create a two-way strategic merge patch (``CreateTwoWayMergePatch``).

The inverse of :func:`~k8py.api.patch.strategic_merge.apply_strategic_merge_patch`:
for documents ``a`` and ``b`` of the same definition,
``apply(a, create_two_way_merge_patch(a, b, name)) == b`` provided ``b`` has no
``null`` object members and merge lists hold no duplicate keys.

The patch has the shape kubectl sends: changed scalars and replaced lists as
values, ``null`` for removed keys, merge lists reduced to the changed items
(carrying their merge key), ``{"$patch": "delete", <key>: ...}`` for removed
items, ``$deleteFromPrimitiveList/<field>`` for removed primitives, and
``$setElementOrder/<field>`` whenever a merge list's content or order changed;
``$retainKeys`` for fields with the ``retainKeys`` strategy. Inputs are not
mutated.
"""

from __future__ import annotations

from typing import Any

from k8py.api.patch import schema_walk as sw
from k8py.api.patch.json_values import deep_copy, go_format, json_equal, json_kind
from k8py.api.patch.list_order import sort_by
from k8py.api.patch.patch_errors import internal, no_merge_key, unprocessable
from k8py.api.patch.strategic_merge import (
    DELETE_FROM_PRIMITIVE_LIST,
    DIRECTIVE,
    RETAIN_KEYS,
    SET_ELEMENT_ORDER,
    ERR_LIST_OF_LISTS,
    element_kind,
    split_strategy,
)

__all__ = ["create_two_way_merge_patch"]


def create_two_way_merge_patch(
    original: dict[str, Any], modified: dict[str, Any], schema_name: str | None
) -> dict[str, Any]:
    return _diff_maps(original, modified, sw.root_schema(schema_name), retain_keys=False)


def _diff_maps(
    original: dict[str, Any], modified: dict[str, Any], schema: sw.Schema | None, *, retain_keys: bool
) -> dict[str, Any]:
    patch: dict[str, Any] = {}
    retained: list[str] = []
    for key, new in modified.items():
        if retain_keys and new is not None:
            retained.append(key)
        if key not in original:
            patch[key] = deep_copy(new)
            continue
        old = original[key]
        if key == DIRECTIVE:
            if not isinstance(old, str) or not isinstance(new, str):
                raise internal(f"invalid value for special key: {DIRECTIVE}")
            if old != new:
                patch[key] = new
            continue
        if json_kind(old) != json_kind(new):
            patch[key] = deep_copy(new)
            continue
        field = sw.field_schema(schema, key)
        strategies, merge_key = sw.patch_meta(field)
        field_retain, strategy = split_strategy(strategies)
        if isinstance(old, dict):
            if strategy == "replace":
                patch[key] = deep_copy(new)
            else:
                sub = _diff_maps(old, new, field, retain_keys=field_retain)
                if sub:
                    patch[key] = sub
        elif isinstance(old, list) and strategy == "merge":
            _diff_merge_list(key, old, new, field, merge_key, field_retain, patch)
        elif not json_equal(old, new):
            patch[key] = deep_copy(new)
    for key in original:
        if key not in modified:
            patch[key] = None
    extra = any(v is not None and k not in modified for k, v in original.items())
    if retained and (patch or extra):
        patch[RETAIN_KEYS] = sorted(retained, key=go_format)
    return patch


def _diff_merge_list(
    key: str,
    old: list[Any],
    new: list[Any],
    field: sw.Schema | None,
    merge_key: str,
    retain_keys: bool,
    patch: dict[str, Any],
) -> None:
    if not old:
        if new:
            patch[key] = deep_copy(new)
        return
    kind = element_kind(old, new)
    if kind == "list":
        raise unprocessable(ERR_LIST_OF_LISTS)
    if kind == "map":
        changes, deletions = _diff_lists_of_maps(old, new, sw.items_schema(field), merge_key, retain_keys)
        changes = sort_by(changes, new, merge_key)
        same_order = len(old) == len(new) and all(
            _merge_key_value(o, merge_key) == _merge_key_value(n, merge_key)
            for o, n in zip(old, new)
        )
        changes += deletions
        if changes:
            patch[key] = changes
        if changes or not same_order:
            patch[f"{SET_ELEMENT_ORDER}/{key}"] = [{merge_key: item[merge_key]} for item in new]
        return
    additions = [deep_copy(v) for v in new if not _contains_scalar(old, v)]
    removed: list[Any] = []
    for value in old:
        if not _contains_scalar(new, value) and not _contains_scalar(removed, value):
            removed.append(value)
    additions = sort_by(additions, new, "")
    if additions:
        patch[key] = additions
    if removed:
        patch[f"{DELETE_FROM_PRIMITIVE_LIST}/{key}"] = sorted(removed, key=go_format)
    if removed or not json_equal(old, new):
        patch[f"{SET_ELEMENT_ORDER}/{key}"] = deep_copy(new)


def _contains_scalar(items: list[Any], value: Any) -> bool:
    return any(go_format(item) == go_format(value) for item in items)


def _merge_key_value(item: Any, merge_key: str) -> str:
    if not isinstance(item, dict) or merge_key not in item:
        raise no_merge_key(item if isinstance(item, dict) else {}, merge_key)
    return go_format(item[merge_key])


def _diff_lists_of_maps(
    old: list[Any], new: list[Any], items: sw.Schema | None, merge_key: str, retain_keys: bool
) -> tuple[list[Any], list[Any]]:
    """Changed/added items (with their merge key) and delete directives."""
    if not merge_key:
        raise internal("cannot merge lists without merge key for type map")
    old_by_key = {_merge_key_value(item, merge_key): item for item in old}
    new_by_key = {_merge_key_value(item, merge_key): item for item in new}
    changes: list[Any] = []
    deletions: list[Any] = []
    for name in sorted(set(old_by_key) | set(new_by_key)):
        before, after = old_by_key.get(name), new_by_key.get(name)
        if before is None:
            changes.append(deep_copy(after))
        elif after is None:
            deletions.append({DIRECTIVE: "delete", merge_key: before[merge_key]})
        else:
            sub = _diff_maps(before, after, items, retain_keys=retain_keys)
            if sub:
                sub[merge_key] = after[merge_key]
                changes.append(sub)
    return changes, deletions
