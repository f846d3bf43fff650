"""Matching and ordering the items of a merged strategic-merge list.

After strategic merge patch has merged a list, upstream fixes its order with
a precise rule that clients depend on (``kubectl apply`` sends
``$setElementOrder`` lists to get a stable container order): items named by
the patch come in patch order; items only the server had keep their live
relative order and are slotted in before the first patch item that comes
after them in the live list (``normalizeElementOrder`` / ``mergeSortedSlice``).
Items are identified by their merge-key value (maps) or by value (primitives).
"""

from __future__ import annotations

from typing import Any

from k8py.api.patch.json_values import json_equal
from k8py.api.patch.patch_errors import bad_arg_type, internal, no_merge_key

__all__ = ["DIRECTIVE", "find_by_key", "partition_maps", "normalize_order", "sort_by"]

DIRECTIVE = "$patch"


def find_by_key(items: list[Any], merge_key: str, value: Any) -> int | None:
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise internal(f"value for key {index} is not a map.")
        if merge_key in item and json_equal(item[merge_key], value):
            return index
    return None


def partition_maps(
    merged: list[Any], by: list[Any], merge_key: str
) -> tuple[list[Any], list[Any]]:
    present: list[Any] = []
    server_only: list[Any] = []
    for item in merged:
        if not isinstance(item, dict):
            raise bad_arg_type("map", item)
        if merge_key not in item:
            raise no_merge_key(item, merge_key)
        target = present if find_by_key(by, merge_key, item[merge_key]) is not None else server_only
        target.append(item)
    return present, server_only


def _index(items: list[Any], value: Any, merge_key: str) -> int:
    probe = value.get(merge_key) if merge_key and isinstance(value, dict) else value
    for i, item in enumerate(items):
        other = item.get(merge_key) if merge_key and isinstance(item, dict) else item
        if json_equal(probe, other):
            return i
    return -1


def sort_by(items: list[Any], order: list[Any], merge_key: str) -> list[Any]:
    if merge_key:
        for item in items + order:
            if not isinstance(item, dict):
                raise bad_arg_type("map", item)
            if merge_key not in item:
                raise no_merge_key(item, merge_key)
        kept = [v for v in items if v.get(DIRECTIVE) != "delete"]
        deleted = [v for v in items if v.get(DIRECTIVE) == "delete"]
    else:
        kept, deleted = items, []
    positions = [_index(order, v, merge_key) for v in kept]
    ranked = sorted(range(len(kept)), key=lambda i: positions[i] if positions[i] >= 0 else len(order))
    return [kept[i] for i in ranked] + deleted


def normalize_order(
    patch_items: list[Any],
    server_only: list[Any],
    patch_order: list[Any],
    server_order: list[Any],
    merge_key: str,
) -> list[Any]:
    """Patch items in patch order, server-only items slotted in by live order."""
    right = sort_by(patch_items, patch_order, merge_key)
    left = sort_by(server_only, server_order, merge_key)
    out: list[Any] = []
    i = j = 0
    while i < len(left) or j < len(right):
        if i >= len(left):
            out.append(right[j])
            j += 1
        elif j >= len(right):
            out.append(left[i])
            i += 1
        else:
            li = _index(server_order, left[i], merge_key)
            ri = _index(server_order, right[j], merge_key)
            if li >= 0 and ri >= 0 and li < ri:
                out.append(left[i])
                i += 1
            else:
                out.append(right[j])
                j += 1
    return out
