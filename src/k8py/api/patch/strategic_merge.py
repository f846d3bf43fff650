"""Strategic merge patch (apply side), driven by the upstream OpenAPI schema.

A JSON merge patch in which lists are merged element by element when the
schema says so. For each list field the schema gives
``x-kubernetes-patch-strategy`` and ``x-kubernetes-patch-merge-key``
(:mod:`k8py.api.patch.schema_walk`):

* ``merge`` + merge key (containers on ``name``, Service ports on ``port``):
  patch items update the live item with the same key, new ones are appended;
  ``{"$patch": "delete", "name": "x"}`` removes item ``x``; ``{"$patch":
  "replace"}`` as an item makes the list exactly the other patch items;
* ``merge`` on primitives (finalizers): union, and
  ``$deleteFromPrimitiveList/<field>: [...]`` removes values;
* anything else (or no schema): the patch list replaces the live list.

Maps merge recursively; ``null`` deletes a key; ``{"$patch": "replace"}`` in a
map replaces it, ``{"$patch": "delete"}`` empties it; ``$retainKeys: [...]``
clears every live key not listed (``retainKeys`` strategy, e.g. Deployment
``strategy`` and volumes); ``$setElementOrder/<field>: [...]`` fixes the order
of the merged list (patch order first, then live order), which is what
``kubectl apply`` sends.

Upstream (``apimachinery/pkg/util/strategicpatch``, ``mergeMap``) is followed
step by step, including its errors and their mapping
(:mod:`k8py.api.patch.patch_errors`). One deliberate difference: a patch value
for a key that is absent from the live object is itself merged into an empty
value, so directives and nulls inside it are honoured instead of being stored
verbatim.

Inputs are never mutated (the engine works on deep copies).
"""

from __future__ import annotations

from typing import Any

from k8py.api.patch import schema_walk as sw
from k8py.api.patch.json_values import contains, deep_copy, go_format, json_equal, json_kind
from k8py.api.patch.list_order import find_by_key, normalize_order, partition_maps
from k8py.api.patch.patch_errors import (
    bad_arg_type,
    bad_request,
    internal,
    no_merge_key,
    unprocessable,
)

__all__ = [
    "DIRECTIVE",
    "RETAIN_KEYS",
    "SET_ELEMENT_ORDER",
    "DELETE_FROM_PRIMITIVE_LIST",
    "apply_strategic_merge_patch",
    "split_strategy",
    "element_kind",
]

DIRECTIVE = "$patch"
RETAIN_KEYS = "$retainKeys"
SET_ELEMENT_ORDER = "$setElementOrder"
DELETE_FROM_PRIMITIVE_LIST = "$deleteFromPrimitiveList"

ERR_PRIMITIVE_LIST = "invalid patch format of primitive list"
ERR_RETAIN_KEYS = "invalid patch format of retainKeys"
ERR_SET_ELEMENT_ORDER = "invalid patch format of setElementOrder list"
ERR_NOT_MATCH_RETAIN_KEYS = "patch content doesn't match retainKeys list"
ERR_LIST_OF_LISTS = "lists of lists are not supported"


def apply_strategic_merge_patch(
    original: dict[str, Any], patch: dict[str, Any], schema_name: str | None, *, owned: bool = False
) -> dict[str, Any]:
    """Apply ``patch`` to ``original`` for the definition ``schema_name``.

    ``owned``: the caller hands both over (private copies nobody else holds, as
    a body just decoded and an object decoded for this attempt): they are
    merged in place, not copied first (copying a pod twice was a tenth of a
    status patch's cost), and must not be used afterwards.
    """
    if not isinstance(patch, dict):
        raise bad_request("invalid JSON document")
    if not owned:
        original, patch = deep_copy(original), deep_copy(patch)
    return _merge_map(original, patch, sw.root_schema(schema_name))


def split_strategy(strategies: list[str]) -> tuple[bool, str]:
    """``(retain_keys, strategy)`` from ``merge,retainKeys`` (extractRetainKeysPatchStrategy)."""
    if not strategies:
        return False, ""
    if len(strategies) == 1:
        return (True, "") if strategies[0] == "retainKeys" else (False, strategies[0])
    if len(strategies) == 2 and "retainKeys" in strategies:
        other = strategies[0] if strategies[1] == "retainKeys" else strategies[1]
        return True, other
    raise internal(f"unexpected patch strategy: {go_format(strategies)}")


def element_kind(*lists: list[Any]) -> str:
    """The one JSON kind shared by every element (sliceElementType)."""
    kind = ""
    for items in lists:
        for item in items:
            current = json_kind(item)
            if not kind:
                kind = current
                if kind == "list":
                    raise unprocessable(ERR_LIST_OF_LISTS)
            elif current != kind:
                raise internal(
                    "list element types are not identical: "
                    + go_format([list(x) for x in lists])
                )
    if not kind:
        raise internal("no elements in any of the given slices")
    return kind




def _extract_key(key: str, prefix: str, error: str) -> str:
    head, sep, rest = key.partition("/")
    if not sep or head != prefix:
        raise bad_request(error)
    return rest


#: (id(parent schema), key) -> (parent schema, (field schema, strategy, merge key)). The
#: schemas are the upstream definitions, loaded once and never freed, so their ids are
#: stable; the parent is kept beside the answer and compared, so an id reused by
#: another dict can never answer for it. Bounded by the schema's size.
_FIELD_META: dict[tuple[int, str], tuple[sw.Schema, tuple[sw.Schema | None, str, str]]] = {}
_NO_META: tuple[sw.Schema | None, str, str] = (None, "", "")


def _field_meta(schema: sw.Schema | None, key: str) -> tuple[sw.Schema | None, str, str]:
    if schema is None:
        return _NO_META
    cached = _FIELD_META.get((id(schema), key))
    if cached is not None and cached[0] is schema:
        return cached[1]
    field = sw.field_schema(schema, key)
    strategies, merge_key = sw.patch_meta(field)
    _, strategy = split_strategy(strategies)
    meta = (field, strategy, merge_key)
    if len(_FIELD_META) < 100_000:
        _FIELD_META[(id(schema), key)] = (schema, meta)
    return meta


def _merge_map(
    original: dict[str, Any], patch: dict[str, Any], schema: sw.Schema | None
) -> dict[str, Any]:
    if DIRECTIVE in patch:
        directive = patch[DIRECTIVE]
        if directive == "replace":
            del patch[DIRECTIVE]
            return patch
        if directive == "delete":
            return {}
        raise internal(f"unknown patch type: {go_format(directive)} in map: {go_format(patch)}")
    _apply_retain_keys(original, patch)
    _apply_set_element_order(original, patch, schema)
    for key, value in list(patch.items()):
        is_delete_list = key.startswith(DELETE_FROM_PRIMITIVE_LIST)
        if is_delete_list:
            key = _extract_key(key, DELETE_FROM_PRIMITIVE_LIST, ERR_PRIMITIVE_LIST)
            if not isinstance(value, list):
                raise bad_request(ERR_PRIMITIVE_LIST)
        if value is None:
            original.pop(key, None)
            continue
        field, strategy, merge_key = _field_meta(schema, key)
        if key not in original:
            if not is_delete_list:
                original[key] = _new_value(value, field, strategy, merge_key)
            continue
        current = original[key]
        if json_kind(current) != json_kind(value):
            original[key] = _new_value(value, field, strategy, merge_key)
        elif isinstance(current, dict):
            original[key] = value if strategy == "replace" else _merge_map(current, value, field)
        elif isinstance(current, list):
            original[key] = _merge_list_field(current, value, field, strategy, merge_key, is_delete_list)
        else:
            original[key] = value
    return original


def _new_value(value: Any, field: sw.Schema | None, strategy: str, merge_key: str) -> Any:
    """A patch value with no live counterpart: merged into an empty value."""
    if isinstance(value, dict) and strategy != "replace":
        return _merge_map({}, value, field)
    if isinstance(value, list):
        return _merge_list_field([], value, field, strategy, merge_key, False)
    return value


def _merge_list_field(
    original: list[Any],
    patch: list[Any],
    field: sw.Schema | None,
    strategy: str,
    merge_key: str,
    is_delete_list: bool,
) -> list[Any]:
    # delete lists are merged whatever the field's strategy; any other list
    # that is not merged is replaced by the patch's list as it is (directives
    # in its items included: typed decoding then drops them as unknown fields)
    if strategy == "merge" or is_delete_list:
        return _merge_list(original, patch, sw.items_schema(field), merge_key, is_delete_list)
    return patch


def _apply_retain_keys(original: dict[str, Any], patch: dict[str, Any]) -> None:
    if RETAIN_KEYS not in patch:
        return
    retain = patch.pop(RETAIN_KEYS)
    if not isinstance(retain, list):
        raise bad_request(ERR_RETAIN_KEYS)
    for key, value in patch.items():
        if value is None or key.startswith((DELETE_FROM_PRIMITIVE_LIST, SET_ELEMENT_ORDER)):
            continue
        if key not in retain:
            raise unprocessable(ERR_NOT_MATCH_RETAIN_KEYS)
    for key in list(original):
        if key not in retain:
            del original[key]


def _apply_set_element_order(
    original: dict[str, Any], patch: dict[str, Any], schema: sw.Schema | None
) -> None:
    """Merge each list that has a ``$setElementOrder`` list, then order it."""
    for key in [k for k in patch if k.startswith(SET_ELEMENT_ORDER)]:
        order = patch.pop(key)
        if not isinstance(order, list):
            raise bad_arg_type("list", order)
        name = _extract_key(key, SET_ELEMENT_ORDER, ERR_SET_ELEMENT_ORDER)
        found_original, found_patch = name in original, name in patch
        live = original.get(name)
        incoming = patch.get(name)
        if found_original and not isinstance(live, list):
            raise bad_arg_type("list", live)
        if found_patch and not isinstance(incoming, list):
            raise bad_arg_type("list", incoming)
        field, strategy, merge_key = _field_meta(schema, name)
        _validate_order(incoming or [], order, merge_key)
        if not found_original and not found_patch:
            continue
        merged = _merge_list_field(
            live if isinstance(live, list) else [], incoming if isinstance(incoming, list) else [],
            field, strategy, merge_key, False,
        )
        if merged:
            if merge_key:
                in_order, server_only = partition_maps(merged, order, merge_key)
            else:
                if any(isinstance(item, dict) for item in merged):
                    raise internal("cannot merge lists without merge key for type map")
                in_order = [v for v in merged if contains(order, v)]
                server_only = [v for v in merged if not contains(order, v)]
            merged = normalize_order(in_order, server_only, order, live or [], merge_key)
        original[name] = merged
        patch.pop(name, None)


def _validate_order(patch_list: list[Any], order: list[Any], merge_key: str) -> None:
    """Patch items must appear in ``$setElementOrder`` in the same relative order."""
    if not order or not patch_list:
        return
    if merge_key:
        non_delete = [
            v for v in patch_list if not (isinstance(v, dict) and v.get(DIRECTIVE) == "delete")
        ]
    else:
        non_delete = patch_list
    p = o = 0
    while p < len(non_delete) and o < len(order):
        item = non_delete[p]
        if isinstance(item, dict) and DIRECTIVE in item:
            p += 1
            continue
        if _key_equal(item, order[o], merge_key):
            p += 1
        o += 1
    if p < len(non_delete) and o >= len(order):
        raise internal(
            f"The order in patch list:\n{go_format(patch_list)}\n doesn't match "
            f"{SET_ELEMENT_ORDER} list:\n{go_format(order)}\n"
        )


def _key_equal(left: Any, right: Any, merge_key: str) -> bool:
    if not merge_key:
        return json_equal(left, right)
    for side in (left, right):
        if not isinstance(side, dict):
            raise bad_arg_type("map", side)
        if merge_key not in side:
            raise no_merge_key(side, merge_key)
    return json_equal(left[merge_key], right[merge_key])


def _merge_list(
    original: list[Any],
    patch: list[Any],
    items: sw.Schema | None,
    merge_key: str,
    is_delete_list: bool,
) -> list[Any]:
    if not original and not patch:
        return original
    kind = element_kind(original, patch)
    if kind != "map":
        if is_delete_list:
            return [v for v in original if not contains(patch, v)]
        merged: list[Any] = []
        for value in original + patch:
            if not contains(merged, value):
                merged.append(value)
        in_patch = [v for v in merged if contains(patch, v)]
        server_only = [v for v in merged if not contains(patch, v)]
        return normalize_order(in_patch, server_only, patch, original, "")
    if not merge_key:
        raise internal("cannot merge lists without merge key for type map")
    original, patch = _apply_list_directives(original, patch, merge_key)
    merged = list(original)
    for item in patch:
        if merge_key not in item:
            raise no_merge_key(item, merge_key)
        index = find_by_key(merged, merge_key, item[merge_key])
        if index is None:
            merged.append(_merge_map({}, item, items))
        else:
            merged[index] = _merge_map(merged[index], item, items)
    in_patch, server_only = partition_maps(merged, patch, merge_key)
    return normalize_order(in_patch, server_only, patch, original, merge_key)


def _apply_list_directives(
    original: list[Any], patch: list[Any], merge_key: str
) -> tuple[list[Any], list[Any]]:
    """Handle ``$patch`` items; return the live list and the plain patch items."""
    plain: list[Any] = []
    replace = False
    for item in patch:
        if DIRECTIVE not in item:
            plain.append(item)
            continue
        directive = item[DIRECTIVE]
        if directive == "delete":
            if merge_key not in item:
                raise no_merge_key(item, merge_key)
            original = [
                v for v in original
                if not (merge_key in v and json_equal(v[merge_key], item[merge_key]))
            ]
        elif directive == "replace":
            replace = True
        elif directive == "merge":
            raise internal("merging lists cannot yet be specified in the patch")
        else:
            raise internal(f"unknown patch type: {go_format(directive)} in map: {go_format(item)}")
    if replace:
        return plain, []
    return original, plain
