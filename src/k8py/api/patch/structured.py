"""Schema-aware walks over objects for server-side apply.

The structured-merge-diff operations server-side apply needs, over JSON
dicts and the upstream schema (:func:`~k8py.api.patch.schema_walk.shape_of`):

* :func:`to_field_set` — the fields a value *sets*: every scalar, every atomic
  list/map as one leaf, every item of a ``set``/``map`` list, every entry of a
  map that is not a declared struct field, and empty/null values;
* :func:`compare` — the paths added, modified and removed between two values
  (containers that appear or disappear count as added/removed too);
* :func:`merge` — the applied config merged over the live object
  (config wins; granular maps and ``set``/``map`` lists merge item by item,
  atomic values are taken whole; list order: live-only items stay where they
  were, config items come in config order);
* :func:`remove_paths` — drop the nodes named by a set of paths.

Simplifications (documented, deliberate): a value whose JSON kind disagrees
with its schema is treated as an atomic leaf; ``null`` members of the merged
result are dropped (for built-in types ``null`` decodes to "unset"); a ``map``
list item missing a key field uses the field's upstream default when it has one
(``protocol: TCP``), else leaves it out of the key.
"""

from __future__ import annotations

from typing import Any

from k8py.api.patch import field_set as fs
from k8py.api.patch import schema_walk as sw
from k8py.api.patch.json_values import deep_copy, json_equal

__all__ = ["to_field_set", "compare", "merge", "remove_paths", "item_element"]

_ABSENT: Any = object()

#: defaults upstream's OpenAPI declares for list-map key fields
_KEY_DEFAULTS = {"protocol": "TCP"}


def _shape(field: sw.Schema | None, value: Any) -> sw.Shape:
    shape = sw.shape_of(field)
    if shape.kind != "deduced":
        return shape
    if isinstance(value, dict):
        return sw.Shape("map")
    if isinstance(value, list):
        return sw.Shape("list", atomic=True)
    return sw.Shape("scalar")


def _granular(shape: sw.Shape, *values: Any) -> str:
    """``map``/``list`` when the values are walked item by item, else ``""``."""
    if shape.atomic or shape.kind == "scalar":
        return ""
    kind = "list" if shape.kind == "list" else "map"
    expected = list if kind == "list" else dict
    present = [v for v in values if v is not _ABSENT and v is not None]
    if any(not isinstance(v, expected) for v in present):
        return ""
    if all(not v for v in present):
        return ""  # both empty: a leaf, so that {} and [] are owned
    return kind


def item_element(shape: sw.Shape, item: Any, index: int) -> str:
    if shape.list_type == "set":
        return fs.value_element(item)
    if shape.list_type == "map" and isinstance(item, dict):
        key: dict[str, Any] = {}
        for name in shape.keys:
            if name in item:
                key[name] = item[name]
            elif name in _KEY_DEFAULTS:
                key[name] = _KEY_DEFAULTS[name]
        return fs.key_element(key)
    return fs.index_element(index)


def _children(shape: sw.Shape, field: sw.Schema | None, value: Any) -> dict[str, tuple[Any, Any]]:
    """``element -> (child value, child field schema)`` for a granular value."""
    out: dict[str, tuple[Any, Any]] = {}
    if isinstance(value, dict):
        for key, child in value.items():
            out[fs.field(key)] = (child, sw.field_schema(field, key))
    elif isinstance(value, list):
        items = sw.items_schema(field)
        for i, child in enumerate(value):
            out.setdefault(item_element(shape, child, i), (child, items))
    return out


def to_field_set(value: Any, field: sw.Schema | None) -> set[fs.Path]:
    out: set[fs.Path] = set()
    _to_set(value, field, (), out)
    return out


def _to_set(value: Any, field: sw.Schema | None, path: fs.Path, out: set[fs.Path]) -> None:
    shape = _shape(field, value)
    kind = _granular(shape, value)
    if not kind:
        if path:
            out.add(path)
        return
    for element, (child, child_field) in _children(shape, field, value).items():
        child_path = path + (element,)
        _to_set(child, child_field, child_path, out)
        declared = shape.kind == "struct" and element[2:] in shape.declared
        if kind == "list" or not declared or child is None or child == {} or child == []:
            out.add(child_path)


class Comparison:
    """Paths that differ between two values."""

    def __init__(self) -> None:
        self.added: set[fs.Path] = set()
        self.modified: set[fs.Path] = set()
        self.removed: set[fs.Path] = set()

    def same(self) -> bool:
        return not (self.added or self.modified or self.removed)


def compare(old: Any, new: Any, field: sw.Schema | None) -> Comparison:
    result = Comparison()
    _compare(old, new, field, (), result)
    return result


def _compare(lhs: Any, rhs: Any, field: sw.Schema | None, path: fs.Path, c: Comparison) -> None:
    probe = rhs if rhs is not _ABSENT else lhs
    shape = _shape(field, probe)
    kind = _granular(shape, lhs, rhs)
    if not kind:
        if not path:
            return
        if lhs is _ABSENT:
            c.added.add(path)
        elif rhs is _ABSENT:
            c.removed.add(path)
        elif not json_equal(lhs, rhs):
            c.modified.add(path)
        return
    left = _children(shape, field, lhs) if lhs not in (_ABSENT, None) else {}
    right = _children(shape, field, rhs) if rhs not in (_ABSENT, None) else {}
    for element in left.keys() | right.keys():
        lv, lf = left.get(element, (_ABSENT, None))
        rv, rf = right.get(element, (_ABSENT, None))
        _compare(lv, rv, rf if rv is not _ABSENT else lf, path + (element,), c)
    if path:
        if lhs is _ABSENT or lhs is None:
            c.added.add(path)
        elif rhs is _ABSENT or rhs is None:
            c.removed.add(path)


def merge(live: Any, config: Any, field: sw.Schema | None) -> Any:
    """``config`` applied over ``live``; neither is mutated."""
    return _drop_nulls(_merge(live, config, field))


def _merge(lhs: Any, rhs: Any, field: sw.Schema | None) -> Any:
    if lhs is _ABSENT or lhs is None:
        return deep_copy(rhs)
    shape = _shape(field, rhs)
    kind = _granular(shape, lhs, rhs)
    if not kind:
        return deep_copy(rhs)
    if kind == "map":
        out = {k: deep_copy(v) for k, v in lhs.items()}
        for key, value in rhs.items():
            out[key] = _merge(lhs.get(key, _ABSENT), value, sw.field_schema(field, key))
        return out
    return _merge_list(lhs, rhs, shape, sw.items_schema(field))


def _merge_list(lhs: list[Any], rhs: list[Any], shape: sw.Shape, items: sw.Schema | None) -> list[Any]:
    left = [(item_element(shape, v, i), v) for i, v in enumerate(lhs)]
    right: dict[str, Any] = {}
    right_order: list[str] = []
    for i, v in enumerate(rhs):
        element = item_element(shape, v, i)
        if element not in right:
            right[element] = v
            right_order.append(element)
    left_map: dict[str, Any] = {}
    for element, v in left:
        left_map.setdefault(element, v)
    shared = [e for e in right_order if e in left_map]
    out: list[Any] = []
    emitted: set[str] = set()

    def emit(element: str) -> None:
        emitted.add(element)
        if element in right:
            out.append(_merge(left_map.get(element, _ABSENT), right[element], items))
        else:
            out.append(deep_copy(left_map[element]))

    li = ri = si = 0
    while li < len(left) or ri < len(right_order):
        if li < len(left) and left[li][0] in emitted:
            li += 1
            continue
        next_shared = shared[si] if si < len(shared) else None
        if li < len(left) and ri < len(right_order):
            element = left[li][0]
            if element == right_order[ri]:
                emit(element)
                li, ri = li + 1, ri + 1
                si += 1 if element == next_shared else 0
                continue
            if element in right and next_shared is not None and next_shared != element:
                li += 1
                continue
        if li < len(left) and left[li][0] not in right:
            emit(left[li][0])
            li += 1
            continue
        if ri < len(right_order):
            element = right_order[ri]
            emit(element)
            ri += 1
            si += 1 if element == next_shared else 0
            continue
        li += 1  # a shared item already emitted; bound the loop
    return out


def _drop_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


def remove_paths(value: Any, paths: set[fs.Path], field: sw.Schema | None) -> Any:
    """A copy of ``value`` without the nodes (and subtrees) named by ``paths``."""
    if not paths:
        return deep_copy(value)
    return _remove(value, field, {p for p in paths if p}, ())


def _remove(value: Any, field: sw.Schema | None, paths: set[fs.Path], path: fs.Path) -> Any:
    shape = _shape(field, value)
    if not _granular(shape, value):
        return deep_copy(value)
    below = {p for p in paths if p[: len(path)] == path and len(p) > len(path)}
    if not below:
        return deep_copy(value)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, child in value.items():
            child_path = path + (fs.field(key),)
            if child_path not in below:
                out[key] = _remove(child, sw.field_schema(field, key), below, child_path)
        return out
    items = sw.items_schema(field)
    kept: list[Any] = []
    for i, child in enumerate(value):
        child_path = path + (item_element(shape, child, i),)
        if child_path not in below:
            kept.append(_remove(child, items, below, child_path))
    return kept
