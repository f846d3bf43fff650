"""JSON value helpers shared by the patch engines.

Patch engines compare and copy JSON-shaped values (dict, list, str, int,
float, bool, None). Python's ``==`` is wrong for that: ``True == 1`` and
``1 == 1.0`` are both true, while JSON (and Go, whose semantics we mirror)
tells booleans and numbers apart. :func:`json_equal` is the equality every
engine must use. :func:`go_format` renders a value the way Go's ``%v`` does,
because upstream error messages embed values that way
(``map: map[image:nginx] does not contain declared merge key: name``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["json_kind", "json_equal", "deep_copy", "go_format", "contains"]


def json_kind(value: Any) -> str:
    """One of ``null``, ``bool``, ``number``, ``string``, ``list``, ``map``."""
    t = type(value)  # the exact common types first (subclasses take the isinstance chain below)
    if t is str:
        return "string"
    if t is dict:
        return "map"
    if t is list:
        return "list"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "map"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def json_equal(a: Any, b: Any) -> bool:
    """Structural equality that keeps booleans apart from numbers."""
    t = type(a)
    if t is type(b):  # the usual case (merge keys are strings): no kind names needed
        if t is dict:
            return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
        if t is list:
            return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
        if t is str or t is int or t is float or t is bool or a is None:
            return bool(a == b)
    ka, kb = json_kind(a), json_kind(b)
    if ka != kb:
        return False
    if ka == "map":
        if a.keys() != b.keys():
            return False
        return all(json_equal(a[k], b[k]) for k in a)
    if ka == "list":
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    return bool(a == b)


def contains(items: list[Any], value: Any) -> bool:
    return any(json_equal(item, value) for item in items)


def deep_copy(value: Any) -> Any:
    """Copy dicts and lists recursively; scalars are immutable and shared."""
    if isinstance(value, dict):
        return {k: deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [deep_copy(v) for v in value]
    return value


def go_format(value: Any) -> str:
    """Render like Go's ``fmt.Sprintf("%v", v)`` for decoded JSON values."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, (int, str)):
        return str(value)
    if isinstance(value, list):
        return "[" + " ".join(go_format(v) for v in value) + "]"
    if isinstance(value, dict):
        inner = " ".join(f"{k}:{go_format(value[k])}" for k in sorted(value))
        return f"map[{inner}]"
    return str(value)
