"""Kubernetes' list library and cel-go's sets extension.

Upstream (``k8s.io/apiserver/pkg/cel/library/lists.go``)::

    <list<T>>.isSorted() bool        T comparable
    <list<T>>.sum() T                T int, uint, double (0 when empty; a duration sum is
                                     not returned: cel-cpp cannot carry a
                                     timedelta out of a ``dyn`` result)
    <list<T>>.min() T, .max() T      error on an empty list
    <list<T>>.indexOf(T) int         -1 when absent
    <list<T>>.lastIndexOf(T) int
    sets.contains(list, list) bool, sets.equivalent(list, list), sets.intersects(list, list)

cel-cpp dispatches a Python overload on the *runtime kind* of each argument
(``list``, ``int64``, ...), never through ``dyn`` or a type parameter, so the
element argument of ``indexOf`` gets one overload per scalar kind, and the
results of ``sum``/``min``/``max`` are declared ``dyn``.

Equality follows CEL, not Python: ``true`` is not ``1`` (``_same`` compares
the kind too).
"""

from __future__ import annotations

from typing import Any

from cel_expr_python import cel

__all__ = ["extension"]

T = cel.Type
_LIST = T.List(T.DYN)
_SCALARS = {"int": T.INT, "uint": T.UINT, "double": T.DOUBLE, "string": T.STRING, "bool": T.BOOL,
            "bytes": T.BYTES, "duration": T.DURATION, "timestamp": T.TIMESTAMP}


def _key(value: Any) -> tuple[str, Any]:
    # bool is an int in Python; CEL keeps them apart
    return (type(value).__name__, value)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)


def _comparable(items: list[Any]) -> None:
    kinds = {type(item) for item in items}
    if len(kinds) > 1 and not kinds <= {int, float}:
        raise ValueError("no such overload")


def is_sorted(items: list[Any]) -> bool:
    _comparable(items)
    return all(items[i] <= items[i + 1] for i in range(len(items) - 1))


def list_sum(items: list[Any]) -> Any:
    if not items:
        return 0
    _comparable(items)
    total = items[0]
    for item in items[1:]:
        total = total + item
    return total


def list_min(items: list[Any]) -> Any:
    if not items:
        raise ValueError("min called on empty list")
    _comparable(items)
    return min(items)


def list_max(items: list[Any]) -> Any:
    if not items:
        raise ValueError("max called on empty list")
    _comparable(items)
    return max(items)


def index_of(items: list[Any], value: Any) -> int:
    for i, item in enumerate(items):
        if _same(item, value):
            return i
    return -1


def last_index_of(items: list[Any], value: Any) -> int:
    for i in range(len(items) - 1, -1, -1):
        if _same(items[i], value):
            return i
    return -1


def sets_contains(items: list[Any], sub: list[Any]) -> bool:
    return all(any(_same(s, i) for i in items) for s in sub)


def sets_equivalent(a: list[Any], b: list[Any]) -> bool:
    return sets_contains(a, b) and sets_contains(b, a)


def sets_intersects(a: list[Any], b: list[Any]) -> bool:
    return any(any(_same(x, y) for y in b) for x in a)


def _index_overloads(name: str, impl: Any) -> cel.FunctionDecl:
    overloads = [cel.Overload(f"list_{name}_{kind}", T.INT, [_LIST, t], is_member=True, impl=impl)
                 for kind, t in _SCALARS.items()]
    overloads.append(cel.Overload(f"list_{name}_list", T.INT, [_LIST, _LIST], is_member=True, impl=impl))
    overloads.append(cel.Overload(f"list_{name}_map", T.INT, [_LIST, T.Map(T.DYN, T.DYN)], is_member=True,
                                  impl=impl))
    return cel.FunctionDecl(name, overloads)


def extension() -> cel.CelExtension:
    def member(name: str, result: Any, impl: Any) -> cel.FunctionDecl:
        return cel.FunctionDecl(name, [cel.Overload(f"list_{name}", result, [_LIST], is_member=True, impl=impl)])

    def sets(name: str, impl: Any) -> cel.FunctionDecl:
        return cel.FunctionDecl(f"sets.{name}", [cel.Overload(f"sets_{name}_list", T.BOOL, [_LIST, _LIST], impl=impl)])

    return cel.CelExtension("k8py.lists", [
        member("isSorted", T.BOOL, is_sorted),
        member("sum", T.DYN, list_sum),
        member("min", T.DYN, list_min),
        member("max", T.DYN, list_max),
        _index_overloads("indexOf", index_of),
        _index_overloads("lastIndexOf", last_index_of),
        sets("contains", sets_contains),
        sets("equivalent", sets_equivalent),
        sets("intersects", sets_intersects),
    ])

