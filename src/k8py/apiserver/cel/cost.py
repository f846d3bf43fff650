"""What an expression costs, in cel-go's units, over the checked syntax tree.

Upstream bounds CEL in two ways (``k8s.io/apiserver/pkg/apis/cel/config.go``):
a *runtime* cost per evaluation (``PerCallLimit`` = 1,000,000) and per request
(``RuntimeCELCostBudget`` = 10,000,000 for a CRD's rules on one object), and a
*static estimate* checked when a CRD or policy is written
(``StaticEstimatedCostLimit`` = 10,000,000 per rule). cel-go counts one unit
per identifier, field selection and function call, 10 per list literal, 30 per
map literal, ``0.1`` per character a string function traverses, and the loop
body once per element of a comprehension.

cel-cpp has no cost tracker, so this module computes the same units by walking
the tree from :mod:`k8py.apiserver.cel.syntax_tree` with what is known about
the values:

* at run time, the activation's actual values (``self.items.all(x, ...)``
  walks the body once per actual element, with ``x`` bound to it);
* statically, :class:`Shape` values (a schema node's ``maxItems``,
  ``maxLength``, ``maxProperties``, or upstream's worst case when unbounded).

Where a value is computed rather than read (a ``map()`` result, a
concatenation) only its size bound is carried. The result is an upper bound
of cel-go's actual cost: a comprehension is charged every iteration even when
``all``/``exists`` would stop early, and both sides of ``&&``/``||``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Protocol

from k8py.apiserver.cel.syntax_tree import Node

__all__ = ["Shape", "estimate", "has_comprehension", "PER_CALL_LIMIT", "RUNTIME_BUDGET",
           "STATIC_ESTIMATED_COST_LIMIT", "STATIC_ESTIMATED_CRD_COST_LIMIT"]

PER_CALL_LIMIT = 1_000_000
RUNTIME_BUDGET = 10_000_000
STATIC_ESTIMATED_COST_LIMIT = 10_000_000
STATIC_ESTIMATED_CRD_COST_LIMIT = 100_000_000

STRING_TRAVERSAL = 0.1
REGEX_LENGTH = 0.25
LIST_CREATE = 10
MAP_CREATE = 30

_UNKNOWN = object()
_STRING_SCANS = {"contains", "startsWith", "endsWith", "lowerAscii", "upperAscii", "trim", "replace", "split",
                 "substring", "charAt", "indexOf", "lastIndexOf", "reverse", "join", "url", "isURL", "ip", "isIP",
                 "cidr", "isCIDR", "quantity", "isQuantity", "format", "quote", "string", "bytes", "validate"}
_REGEX = {"matches", "find", "findAll"}
_LIST_SCANS = {"isSorted", "sum", "min", "max", "indexOf", "lastIndexOf", "@in", "sets.contains",
               "sets.equivalent", "sets.intersects", "join", "_==_", "_!=_"}
_NO_CALL_COST = {"_&&_", "_||_", "_?_:_", "@not_strictly_false", "!_"}


class Shape(Protocol):
    """A value known only by its schema: what the static estimate walks."""

    max_size: int

    def field(self, name: str) -> Shape | None: ...

    def item(self) -> Shape | None: ...


class _Exceeded(Exception):
    """A partial cost already passed the limit: the total can only be larger."""


def _signature(value: Any) -> Any:
    # elements with the same signature cost the same to walk a body over
    if isinstance(value, (str, bytes)):
        return (type(value), len(value))
    if isinstance(value, (list, dict)):
        return None
    return type(value)


class _Walk:
    def __init__(self, unknown_size: int, limit: float | None) -> None:
        self.unknown_size = unknown_size
        self.limit = limit

    def size_of(self, value: Any, bound: int) -> int:
        if value is _UNKNOWN:
            return bound
        if isinstance(value, (str, bytes, list, dict)):
            return len(value)
        size = getattr(value, "max_size", None)
        return bound if size is None else int(size)

    def node(self, node: Node, scope: Mapping[str, Any]) -> tuple[float, Any, int]:
        kind = node.kind
        if kind == "const":
            value = node.value
            return 0.0, value, len(value) if isinstance(value, (str, bytes)) else 1
        if kind == "ident":
            value = scope.get(node.name, _UNKNOWN)
            return 1.0, value, self.size_of(value, self.unknown_size)
        if kind == "select":
            cost, value, size = self.node(node.children[0], scope)
            return cost + 1, *self._select(value, node.name, bool(node.value), size)
        if kind == "list":
            return self._literal(node, scope, LIST_CREATE, len(node.children))
        if kind == "map":
            return self._literal(node, scope, MAP_CREATE, len(node.children) // 2)
        if kind == "comprehension":
            return self._comprehension(node, scope)
        return self._call(node, scope)

    def _select(self, value: Any, name: str, test_only: bool, bound: int) -> tuple[Any, int]:
        if isinstance(value, dict):
            if test_only:
                return name in value, 1
            child = value.get(name, _UNKNOWN)
            return child, self.size_of(child, 0)
        if hasattr(value, "field") and not isinstance(value, (str, bytes, list)):
            if test_only:
                return _UNKNOWN, 1
            child = value.field(name)
            return (child, child.max_size) if child is not None else (_UNKNOWN, bound)
        return _UNKNOWN, 1 if test_only else bound

    def _literal(self, node: Node, scope: Mapping[str, Any], base: int, size: int) -> tuple[float, Any, int]:
        cost = float(base)
        for child in node.children:
            cost += self.node(child, scope)[0]
        return cost, _UNKNOWN, size

    def _call(self, node: Node, scope: Mapping[str, Any]) -> tuple[float, Any, int]:
        parts = [self.node(child, scope) for child in node.children]
        name = node.name
        if name == "_?_:_" and len(parts) == 3:
            return parts[0][0] + max(parts[1][0], parts[2][0]), _UNKNOWN, max(parts[1][2], parts[2][2])
        cost = sum(p[0] for p in parts)
        sizes = [p[2] for p in parts]
        if name in _NO_CALL_COST:
            return cost, _UNKNOWN, 1
        if name == "_[_]" and len(parts) == 2:
            container, key = parts[0][1], parts[1][1]
            value: Any = _UNKNOWN
            if isinstance(container, (dict, list)) and key is not _UNKNOWN:
                try:
                    value = container[key]
                except (KeyError, IndexError, TypeError):
                    value = _UNKNOWN
            elif hasattr(container, "item") and not isinstance(container, (str, bytes)):
                item = container.item()
                value = item if item is not None else _UNKNOWN
            return cost + 1, value, self.size_of(value, sizes[0])
        cost += 1
        if name in _REGEX and len(sizes) >= 2:
            cost += math.ceil((1 + sizes[0]) * STRING_TRAVERSAL) * math.ceil(sizes[1] * REGEX_LENGTH)
            return cost, _UNKNOWN, sizes[0]
        if name in _LIST_SCANS and sizes:
            cost += max(sizes) if name not in {"_==_", "_!=_"} else math.ceil(min(sizes) * STRING_TRAVERSAL)
            return cost, _UNKNOWN, 1
        if name in _STRING_SCANS and sizes:
            cost += math.ceil(sum(sizes) * STRING_TRAVERSAL)
            return cost, _UNKNOWN, max(sizes)
        if name == "_+_" and len(sizes) == 2:
            cost += math.ceil((sizes[0] + sizes[1]) * STRING_TRAVERSAL)
            return cost, _UNKNOWN, sizes[0] + sizes[1]
        return cost, _UNKNOWN, 1

    def _comprehension(self, node: Node, scope: Mapping[str, Any]) -> tuple[float, Any, int]:
        range_node, init, condition, step, result = node.children
        cost, items, size = self.node(range_node, scope)
        init_cost, _, init_size = self.node(init, scope)
        cost += init_cost
        inner = dict(scope)
        inner[node.accu] = _UNKNOWN
        elements: list[Any] | None = None
        if isinstance(items, list):
            elements = items
        elif isinstance(items, dict):
            elements = list(items)
        if elements is not None:
            seen: dict[Any, float] = {}
            for element in elements:
                signature = _signature(element)
                body = seen.get(signature) if signature is not None else None
                if body is None:
                    inner[node.name] = element
                    body = self.node(condition, inner)[0] + self.node(step, inner)[0]
                    if signature is not None:
                        seen[signature] = body
                cost += body
                if self.limit is not None and cost > self.limit:
                    raise _Exceeded
        else:
            item = items.item() if hasattr(items, "item") and items is not _UNKNOWN else None
            inner[node.name] = item if item is not None else _UNKNOWN
            cost += size * (self.node(condition, inner)[0] + self.node(step, inner)[0])
        result_cost, _, _ = self.node(result, inner)
        return cost + result_cost, _UNKNOWN, max(size, init_size)


def estimate(root: Node, scope: Mapping[str, Any], *, unknown_size: int = 0, limit: int | None = None) -> int:
    """cel-go units for evaluating ``root`` with ``scope`` (values or :class:`Shape`).

    With ``limit``, the walk stops as soon as a partial sum passes it and
    returns ``limit + 1``: a nested comprehension over a large list is refused
    in time proportional to the limit, not to the product of the sizes.
    """
    try:
        return math.ceil(_Walk(unknown_size, limit).node(root, scope)[0])
    except _Exceeded:
        return (limit or 0) + 1


def has_comprehension(root: Node) -> bool:
    stack = [root]
    while stack:
        node = stack.pop()
        if node.kind == "comprehension" and node.name != "#unused":
            return True
        stack.extend(node.children)
    return False
