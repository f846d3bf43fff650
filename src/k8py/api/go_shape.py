"""Objects in the shape upstream's typed round trip gives them.

Upstream's API server decodes every object into its Go type and encodes it
back, and Go's JSON encoder always writes a non-pointer struct field (even
empty), a field without ``omitempty`` (with its zero value) and the zero
value of ``metav1.Time`` as ``null``. So a created Service comes back with
``status: {loadBalancer: {}}``, a Deployment with ``status: {}`` and
``spec.template.metadata.creationTimestamp: null``, a container with
``resources: {}``; clients read those fields without checking for them.
k8py keeps objects as dicts, so it adds what the Go encoder would:
:func:`fill_go_fields` walks an object along the table
:file:`go_shapes.json`, generated from upstream's Go types by
``scripts/gen_go_shapes.py`` (see there for what is and is not covered: nil
slices and maps, written by Go as ``null``, are left out).

Invariants: only *adds* fields that are absent (or ``null`` where Go would
write a zero scalar); never changes a present value; idempotent; kinds and
types outside the table are left alone. Pure: reads the packaged table once.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

import orjson

__all__ = ["fill_go_fields", "shaped_kinds"]

_ZERO, _STRUCT, _PTR, _LIST, _MAP = range(5)
_MODES = {"zero": _ZERO, "struct": _STRUCT, "ptr": _PTR, "list": _LIST, "map": _MAP}

#: one type's rows: (json name, mode, zero value or the nested type's rows)
Rows = list[tuple[str, int, Any]]


class _Shape:
    """One type compiled for filling: the rows that always act (a zero
    scalar, a non-pointer struct: they add what is absent, in field order,
    which is the order Go writes them), and the rows that only descend into
    a value present (pointer, slice, map), looked up by the object's own keys
    (an object holds few of the many optional fields its type declares)."""

    __slots__ = ("always", "present", "present_keys", "empty")

    def __init__(self) -> None:
        self.always: list[tuple[str, int, Any]] = []
        self.present: dict[str, tuple[int, Any]] = {}
        self.present_keys: frozenset[str] = frozenset()
        self.empty = True


@functools.cache
def _table() -> tuple[dict[str, _Shape], dict[str, str]]:
    raw = orjson.loads(resources.files("k8py.api").joinpath("go_shapes.json").read_bytes())
    types: dict[str, _Shape] = {name: _Shape() for name in raw["types"]}
    unknown = _Shape()  # a nested type outside the table: nothing to fill
    for name, rows in raw["types"].items():
        shape = types[name]
        for json_name, mode, arg in rows:
            code = _MODES[mode]
            # nested types become references to their (shared) compiled shapes
            target = arg if code == _ZERO else types.get(arg, unknown)
            if code in (_ZERO, _STRUCT):
                shape.always.append((json_name, code, target))
            else:
                shape.present[json_name] = (code, target)
        shape.present_keys = frozenset(shape.present)
        shape.empty = not rows
    return types, raw["kinds"]


def shaped_kinds() -> dict[str, str]:
    """``apiVersion/Kind`` -> the Go type the table knows it as."""
    return dict(_table()[1])


def fill_go_fields(api_version: str, kind: str, obj: dict[str, Any]) -> None:
    """Add, in place, the fields Go's encoder would write for this kind."""
    types, kinds = _table()
    name = kinds.get(f"{api_version}/{kind}")
    if name is not None:
        _fill(types[name], obj)


def _fill(shape: _Shape, obj: dict[str, Any]) -> None:
    for name, mode, arg in shape.always:
        value = obj.get(name)
        if mode == _ZERO:
            if value is None and (arg is not None or name not in obj):
                obj[name] = arg  # the zero values are immutable: None, 0, "", False, "0", "0s"
        else:  # _STRUCT
            if value is None:
                value = obj[name] = {}
            if type(value) is dict and not arg.empty:
                _fill(arg, value)
    if not shape.present:
        return
    present = shape.present
    for name in obj.keys() & shape.present_keys:
        value = obj[name]
        if value is None:
            continue
        mode, arg = present[name]
        if mode == _PTR:
            if type(value) is dict:
                _fill(arg, value)
        elif mode == _LIST:
            if type(value) is list:
                for item in value:
                    if type(item) is dict:
                        _fill(arg, item)
        elif type(value) is dict:  # _MAP
            for item in value.values():
                if type(item) is dict:
                    _fill(arg, item)
