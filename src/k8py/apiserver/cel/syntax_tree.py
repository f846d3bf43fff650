"""The checked syntax tree of a compiled expression, for cost accounting.

cel-expr-python does not expose the tree, only ``Expression.serialize()``: a
``google.protobuf.Any`` holding a ``cel.expr.CheckedExpr``. This module reads
that wire format directly (the handful of ``cel/expr/syntax.proto`` fields the
cost model needs), so no generated protobuf code is involved.

The result is a small immutable tree of :class:`Node`; ``kind`` is one of
``const``, ``ident``, ``select``, ``call``, ``list``, ``map`` (a map or
message literal) and ``comprehension``. Unknown fields are skipped, so a newer
cel-cpp adding fields does not break decoding.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

__all__ = ["Node", "decode_checked", "decode_positions"]


@dataclasses.dataclass(frozen=True, slots=True)
class Node:
    kind: str
    name: str = ""                     # ident name, select field, call function, comprehension iter var
    value: Any = None                  # const value; select: test_only (has())
    children: tuple[Node, ...] = ()    # select: (operand,); call: (target?, *args); list/map: values
    has_target: bool = False           # call: receiver-style (x.f(y))
    accu: str = ""                     # comprehension: accumulator variable
    id: int = 0                        # the expression id (``decode_positions`` maps it to an offset)


def _fields(data: bytes) -> list[tuple[int, Any]]:
    out: list[tuple[int, Any]] = []
    i, n = 0, len(data)
    while i < n:
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 1:
            value, i = data[i:i + 8], i + 8
        elif wire == 2:
            length, i = _varint(data, i)
            value, i = data[i:i + length], i + length
        elif wire == 5:
            value, i = data[i:i + 4], i + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        out.append((number, value))
    return out


def _varint(data: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        byte = data[i]
        i += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, i
        shift += 7


def _first(fields: list[tuple[int, Any]], number: int, default: Any = None) -> Any:
    for n, v in fields:
        if n == number:
            return v
    return default


def _constant(data: bytes) -> Any:
    for number, value in _fields(data):
        if number == 1:
            return None
        if number == 2:
            return bool(value)
        if number == 3:
            return value - (1 << 64) if value >= 1 << 63 else value
        if number == 4:
            return value
        if number == 5:
            return struct.unpack("<d", value)[0]
        if number == 6:
            return value.decode()
        if number == 7:
            return bytes(value)
    return None


def _expr(data: bytes) -> Node:
    fields = _fields(data)
    node = _expr_of(fields)
    expr_id = _first(fields, 2, 0)
    return dataclasses.replace(node, id=expr_id) if expr_id else node


def _expr_of(fields: list[tuple[int, Any]]) -> Node:
    for number, value in fields:
        if number == 3:
            return Node("const", value=_constant(value))
        if number == 4:
            return Node("ident", name=_first(_fields(value), 1, b"").decode())
        if number == 5:
            f = _fields(value)
            operand = _first(f, 1)
            return Node("select", name=_first(f, 2, b"").decode(), value=bool(_first(f, 3, 0)),
                        children=(_expr(operand),) if operand is not None else ())
        if number == 6:
            f = _fields(value)
            target = _first(f, 1)
            args = tuple(_expr(v) for n, v in f if n == 3)
            children = ((_expr(target),) if target is not None else ()) + args
            return Node("call", name=_first(f, 2, b"").decode(), children=children, has_target=target is not None)
        if number == 7:
            return Node("list", children=tuple(_expr(v) for n, v in _fields(value) if n == 1))
        if number == 8:
            entries = []
            for n, entry in _fields(value):
                if n == 2:
                    ef = _fields(entry)
                    key = _first(ef, 3)
                    if key is not None:
                        entries.append(_expr(key))
                    entries.append(_expr(_first(ef, 4, b"")))
            return Node("map", children=tuple(entries))
        if number == 9:
            f = _fields(value)
            parts = {n: v for n, v in f}
            # children: range, init, condition, step, result
            children = tuple(_expr(parts.get(k, b"")) for k in (2, 4, 5, 6, 7))
            return Node("comprehension", name=parts.get(1, b"").decode(), accu=parts.get(3, b"").decode(),
                        children=children, value=parts.get(8, b"").decode() or None)
    return Node("const")


def decode_checked(serialized: bytes) -> Node:
    """The root expression of ``Expression.serialize()``'s ``Any(CheckedExpr)``
    (or ``Any(ParsedExpr)`` for an expression compiled unchecked)."""
    any_fields = _fields(serialized)
    checked = _first(any_fields, 2, b"")
    return _expr(_first(_fields(checked), _expr_field(any_fields), b""))


def _expr_field(any_fields: list[tuple[int, Any]]) -> int:
    # CheckedExpr: expr = 4, source_info = 5; ParsedExpr: expr = 2, source_info = 3
    return 2 if bytes(_first(any_fields, 1, b"")).endswith(b"ParsedExpr") else 4


def decode_positions(serialized: bytes) -> dict[int, int]:
    """Expression id -> character offset in the source (``SourceInfo.positions``)."""
    any_fields = _fields(serialized)
    checked = _first(any_fields, 2, b"")
    source_info = _first(_fields(checked), _expr_field(any_fields) + 1, b"")
    out: dict[int, int] = {}
    for number, entry in _fields(source_info):
        if number == 4:
            f = _fields(entry)
            out[_first(f, 1, 0)] = _first(f, 2, 0)
    return out
