"""Kubernetes' quantity library: ``kubernetes.Quantity``.

Upstream (``k8s.io/apiserver/pkg/cel/library/quantity.go``)::

    quantity(<string>) Quantity, isQuantity(<string>) bool
    <Quantity>.sign() int, .isInteger() bool, .asInteger() int,
    .asApproximateFloat() double, .isGreaterThan(Q) bool, .isLessThan(Q) bool,
    .compareTo(Q) int, .add(Q|int) Q, .sub(Q|int) Q

A quantity is carried as its exact value (``numerator/denominator``, from
:func:`k8py.api.quantity.parse_quantity`), so equality and comparison are
exact: ``quantity('1') == quantity('1000m')``.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from cel_expr_python import cel

from k8py.api.quantity import parse_quantity
from k8py.apiserver.cel import types

__all__ = ["extension", "QUANTITY_PATTERN_ERROR"]

T = cel.Type
QUANTITY_PATTERN_ERROR = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
_INT64 = 2**63


def _parse(text: str) -> Fraction:
    try:
        return parse_quantity(text)
    except ValueError:
        raise ValueError(QUANTITY_PATTERN_ERROR) from None


def _wrap(value: Fraction) -> Any:
    return types.new_quantity(f"{value.numerator}/{value.denominator}")


def _value(message: Any) -> Fraction:
    return Fraction(message.value)


def _operand(other: Any) -> Fraction:
    return Fraction(other) if isinstance(other, int) else _value(other)


def to_quantity(text: str) -> Any:
    return _wrap(_parse(text))


def is_quantity(text: str) -> bool:
    try:
        _parse(text)
    except ValueError:
        return False
    return True


def as_integer(message: Any) -> int:
    value = _value(message)
    if value.denominator != 1 or not -_INT64 <= value.numerator < _INT64:
        raise ValueError("cannot convert value to integer")
    return value.numerator


def compare(a: Any, b: Any) -> int:
    x, y = _value(a), _value(b)
    return (x > y) - (x < y)


def extension() -> cel.CelExtension:
    Q = types.QUANTITY

    def member(name: str, result: Any, impl: Any, *args: Any) -> cel.FunctionDecl:
        return cel.FunctionDecl(name, [cel.Overload(f"quantity_{name}", result, [Q, *args], is_member=True,
                                                    impl=impl)])

    return cel.CelExtension("k8py.quantity", [
        cel.FunctionDecl("quantity", [cel.Overload("string_to_quantity", Q, [T.STRING], impl=to_quantity)]),
        cel.FunctionDecl("isQuantity", [cel.Overload("is_quantity_string", T.BOOL, [T.STRING], impl=is_quantity)]),
        member("sign", T.INT, lambda q: (_value(q) > 0) - (_value(q) < 0)),
        member("isInteger", T.BOOL, lambda q: _value(q).denominator == 1 and -_INT64 <= _value(q) < _INT64),
        member("asInteger", T.INT, as_integer),
        member("asApproximateFloat", T.DOUBLE, lambda q: float(_value(q))),
        member("isGreaterThan", T.BOOL, lambda a, b: compare(a, b) > 0, Q),
        member("isLessThan", T.BOOL, lambda a, b: compare(a, b) < 0, Q),
        member("compareTo", T.INT, compare, Q),
        cel.FunctionDecl("add", [
            cel.Overload("quantity_add", Q, [Q, Q], is_member=True, impl=lambda a, b: _wrap(_value(a) + _operand(b))),
            cel.Overload("quantity_add_int", Q, [Q, T.INT], is_member=True,
                         impl=lambda a, b: _wrap(_value(a) + _operand(b))),
        ]),
        cel.FunctionDecl("sub", [
            cel.Overload("quantity_sub", Q, [Q, Q], is_member=True, impl=lambda a, b: _wrap(_value(a) - _operand(b))),
            cel.Overload("quantity_sub_int", Q, [Q, T.INT], is_member=True,
                         impl=lambda a, b: _wrap(_value(a) - _operand(b))),
        ]),
    ])
