"""Label and field selectors: parse, match, print — apimachinery's semantics.

Why here: the API server filters lists and watches with them, controllers
select pods with them, and the Scale subresource prints them; all must agree
with upstream on the edge cases clients rely on:

* ``a!=b`` and ``a notin (x,y)`` match objects that do not have ``a`` at all;
  ``a=b`` / ``a in (...)`` / ``a gt 1`` do not.
* A ``LabelSelector`` from the API form (``matchLabels``/``matchExpressions``)
  that is empty matches everything; a missing one (``None``) matches nothing
  (upstream ``LabelSelectorAsSelector``: nil → ``labels.Nothing()``).
* Requirements are kept sorted by key (stable), so ``to_string()`` is
  canonical: ``a=b,c in (x,y),!d``.
* Field selectors only know ``=``, ``==``, ``!=``; values may escape ``\\``,
  ``,`` and ``=`` with a backslash; no whitespace is trimmed (upstream neither).

Errors are ``BadRequest`` with upstream's messages (``unable to parse
requirement: ...``, ``invalid selector: ...``) because the server returns them
to kubectl verbatim. Everything here is immutable and free of I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from k8py.api.errors import BadRequest
from k8py.api.names import go_quote, go_value, is_qualified_name, is_valid_label_value

__all__ = [
    "Operator",
    "Requirement",
    "LabelSelector",
    "parse_label_selector",
    "label_selector_from_dict",
    "FieldTerm",
    "FieldSelector",
    "parse_field_selector",
    "escape_field_value",
]


class Operator(StrEnum):
    IN = "in"
    NOT_IN = "notin"
    EQUALS = "="
    DOUBLE_EQUALS = "=="
    NOT_EQUALS = "!="
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    GREATER_THAN = "gt"
    LESS_THAN = "lt"


_SET_OPS = (Operator.IN, Operator.NOT_IN)
_NUMERIC_OPS = (Operator.GREATER_THAN, Operator.LESS_THAN)
_INT_RE = re.compile(r"[+-]?[0-9]+")
_NO_VALUES = "values set must be empty for exists and does not exist"
_ONE_VALUE = "exact-match compatibility requires one single value"
_SOME_VALUES = "for 'in', 'notin' operators, values set can't be empty"
_ONE_NUMBER = "for 'Gt', 'Lt' operators, exactly one value is required"
_NOT_NUMBER = "for 'Gt', 'Lt' operators, the value must be an integer"
# operator -> (is the value count acceptable?, message when it is not)
_ARITY: dict[Operator, tuple[Callable[[int], bool], str]] = {
    Operator.IN: (lambda n: n > 0, _SOME_VALUES),
    Operator.NOT_IN: (lambda n: n > 0, _SOME_VALUES),
    Operator.EQUALS: (lambda n: n == 1, _ONE_VALUE),
    Operator.DOUBLE_EQUALS: (lambda n: n == 1, _ONE_VALUE),
    Operator.NOT_EQUALS: (lambda n: n == 1, _ONE_VALUE),
    Operator.EXISTS: (lambda n: n == 0, _NO_VALUES),
    Operator.DOES_NOT_EXIST: (lambda n: n == 0, _NO_VALUES),
    Operator.GREATER_THAN: (lambda n: n == 1, _ONE_NUMBER),
    Operator.LESS_THAN: (lambda n: n == 1, _ONE_NUMBER),
}


def _invalid(path: str, value: Any, detail: str) -> str:
    """``field.Invalid(...).Error()``: ``path: Invalid value: "v": detail``."""
    return f"{path}: Invalid value: {go_value(value)}: {detail}"


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``key op values`` term. Build with ``Requirement.new`` to validate."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    @classmethod
    def new(cls, key: str, operator: Operator, values: Iterable[str] = ()) -> Requirement:
        """Upstream ``NewRequirement``; raises ``ValueError`` with its message."""
        vals = list(values)
        errors = []
        if msgs := is_qualified_name(key):
            errors.append(_invalid("key", key, "; ".join(msgs)))
        count_ok, count_msg = _ARITY[operator]
        if not count_ok(len(vals)):
            errors.append(_invalid("values", vals, count_msg))
        for i, v in enumerate(vals):
            if operator in _NUMERIC_OPS and not _INT_RE.fullmatch(v):
                errors.append(_invalid(f"values[{i}]", v, _NOT_NUMBER))
            if msgs := is_valid_label_value(v):
                errors.append(_invalid(f"values[{i}][{key}]", v, "; ".join(msgs)))
        if errors:  # a Go aggregate: one message bare, several in brackets
            raise ValueError(errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")
        if operator in _SET_OPS:
            vals = sorted(set(vals))  # canonical, so equal selectors compare equal
        return cls(key, operator, tuple(vals))

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        has = self.key in labels
        if op in (Operator.IN, Operator.EQUALS, Operator.DOUBLE_EQUALS):
            return has and labels[self.key] in self.values
        if op in (Operator.NOT_IN, Operator.NOT_EQUALS):
            return not has or labels[self.key] not in self.values
        if op is Operator.EXISTS:
            return has
        if op is Operator.DOES_NOT_EXIST:
            return not has
        # gt / lt: a missing key or a non-integer label value never matches.
        if not has or not _INT_RE.fullmatch(labels[self.key]):
            return False
        have, want = int(labels[self.key]), int(self.values[0])
        return have > want if op is Operator.GREATER_THAN else have < want

    def to_string(self) -> str:
        op = self.operator
        if op is Operator.DOES_NOT_EXIST:
            return "!" + self.key
        if op is Operator.EXISTS:
            return self.key
        if op in _SET_OPS:
            return f"{self.key} {op.value} ({','.join(sorted(self.values))})"
        if op in _NUMERIC_OPS:
            return f"{self.key}{'>' if op is Operator.GREATER_THAN else '<'}{self.values[0]}"
        return f"{self.key}{op.value}{','.join(self.values)}"


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """AND of requirements, sorted by key. ``nothing=True`` matches no object."""

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False

    @classmethod
    def everything(cls) -> LabelSelector:
        return cls()

    @classmethod
    def match_nothing(cls) -> LabelSelector:
        return cls(nothing=True)

    @classmethod
    def of(cls, requirements: Iterable[Requirement]) -> LabelSelector:
        return cls(tuple(sorted(requirements, key=lambda r: r.key)))

    @property
    def empty(self) -> bool:
        """True when it selects everything (upstream ``Empty()``)."""
        return not self.nothing and not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        if self.nothing:
            return False
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def equality_value(self, key: str) -> str | None:
        """The one value ``key`` must have, if the selector pins it (for indexes).

        Upstream ``RequiresExactMatch``: only the first requirement on ``key``
        is looked at; ``=``, ``==`` or a one-value ``in`` pin it.
        """
        for r in self.requirements:
            if r.key == key:
                pinned = r.operator in (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.IN)
                return r.values[0] if pinned and len(r.values) == 1 else None
        return None

    def to_string(self) -> str:
        return ",".join(r.to_string() for r in self.requirements)

    def __str__(self) -> str:
        return self.to_string()


# --- query-string form ---------------------------------------------------------

_SPECIAL = frozenset("=!(),<>")
_WHITESPACE = frozenset(" \t\r\n")
_SYMBOLS = {"(": "(", ")": ")", ",": ",", "!": "!", "=": "=", "==": "==", "!=": "!=",
            ">": "gt", "<": "lt"}
_KEYWORDS = {"in": "in", "notin": "notin"}
_ID, _END = "id", "end"
_BINARY_OPS = {"in": Operator.IN, "notin": Operator.NOT_IN, "=": Operator.EQUALS,
               "==": Operator.DOUBLE_EQUALS, "!=": Operator.NOT_EQUALS,
               "gt": Operator.GREATER_THAN, "lt": Operator.LESS_THAN}


def _lex(text: str) -> list[tuple[str, str]]:
    """Tokens as ``(kind, literal)``; kind is a symbol, a keyword, id or end."""
    tokens: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in _WHITESPACE:
            i += 1
        if i >= n:
            tokens.append((_END, ""))
            return tokens
        if text[i] in _SPECIAL:
            # Longest run of special characters forming one symbol ("!=", "==");
            # every special character is a symbol alone, so this never fails.
            j = i + 2 if text[i : i + 2] in _SYMBOLS else i + 1
            tokens.append((_SYMBOLS[text[i:j]], text[i:j]))
            i = j
            continue
        j = i
        while j < n and text[j] not in _SPECIAL and text[j] not in _WHITESPACE:
            j += 1
        lit = text[i:j]
        tokens.append((_KEYWORDS.get(lit, _ID), lit))
        i = j


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _lex(text)
        self.pos = 0

    def peek(self, *, values: bool = True) -> tuple[str, str]:
        kind, lit = self.tokens[self.pos]
        # In a value position "in"/"notin" are plain identifiers.
        return (_ID, lit) if values and kind in _KEYWORDS else (kind, lit)

    def take(self, *, values: bool = True) -> tuple[str, str]:
        tok = self.peek(values=values)
        self.pos = min(self.pos + 1, len(self.tokens) - 1)
        return tok

    def parse(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        while True:
            kind, lit = self.peek()
            if kind == _END:
                return reqs
            if kind not in (_ID, "!"):
                raise ValueError(f"found '{lit}', expected: !, identifier, or 'end of string'")
            try:
                reqs.append(self.requirement())
            except ValueError as e:
                raise ValueError(f"unable to parse requirement: {e}") from None
            kind, lit = self.take()
            if kind == _END:
                return reqs
            if kind != ",":
                raise ValueError(f"found '{lit}', expected: ',' or 'end of string'")
            kind, lit = self.peek()
            if kind not in (_ID, "!"):
                raise ValueError(f"found '{lit}', expected: identifier after ','")

    def requirement(self) -> Requirement:
        negated = False
        kind, key = self.take()
        if kind == "!":
            negated = True
            kind, key = self.take()
        if kind != _ID:
            raise ValueError(f"found '{key}', expected: identifier")
        if msgs := is_qualified_name(key):
            raise ValueError(_invalid("<nil>", key, "; ".join(msgs)))
        if negated:
            # "!a" is complete; a following "=b" is then a syntax error.
            return Requirement.new(key, Operator.DOES_NOT_EXIST)
        if self.peek()[0] in (_END, ","):
            return Requirement.new(key, Operator.EXISTS)
        kind, lit = self.take(values=False)
        op = _BINARY_OPS.get(kind)
        if op is None:
            raise ValueError(f"found '{lit}', expected: in, notin, =, ==, !=, gt, lt")
        values = self.set_values() if op in _SET_OPS else [self.exact_value()]
        return Requirement.new(key, op, values)

    def exact_value(self) -> str:
        kind, lit = self.peek()
        if kind in (_END, ","):
            return ""
        kind, lit = self.take()
        if kind != _ID:
            raise ValueError(f"found '{lit}', expected: identifier")
        return lit

    def set_values(self) -> list[str]:
        kind, lit = self.take()
        if kind != "(":
            raise ValueError(f"found '{lit}' expected: '('")
        kind, lit = self.peek()
        if kind == ")":
            self.take()
            return [""]
        if kind not in (_ID, ","):
            raise ValueError(f"found '{lit}', expected: ',', ')' or identifier")
        values: set[str] = set()
        while True:  # bounded: every pass consumes at least one token
            kind, lit = self.take()
            if kind == _ID:
                values.add(lit)
                kind2, lit2 = self.peek()
                if kind2 == ")":
                    break
                if kind2 != ",":
                    raise ValueError(f"found '{lit2}', expected: ',' or ')'")
            elif kind == ",":
                # Empty members: "(,a)", "(a,)", "(a,,b)" all add "".
                if not values:
                    values.add("")
                kind2, _ = self.peek()
                if kind2 == ")":
                    values.add("")
                    break
                if kind2 == ",":
                    self.take()
                    values.add("")
            else:
                raise ValueError(f"found '{lit}', expected: ',', or identifier")
        self.take()  # the ")"
        return sorted(values)


def parse_label_selector(text: str) -> LabelSelector:
    """``a=b,c!=d,e in (x,y),!f`` → selector. ``""`` selects everything.

    Raises ``BadRequest`` with upstream's message on bad syntax or values.
    """
    try:
        return LabelSelector.of(_Parser(text).parse())
    except ValueError as e:
        raise BadRequest(str(e)) from None


_API_OPS = {"In": Operator.IN, "NotIn": Operator.NOT_IN, "Exists": Operator.EXISTS,
            "DoesNotExist": Operator.DOES_NOT_EXIST}


def _string(value: Any) -> str:
    # Schema validation normally rejects these first; never let them become a 500.
    if not isinstance(value, str):
        raise ValueError(f"{go_value(value)} is not a string")
    return value


def label_selector_from_dict(selector: Mapping[str, Any] | None) -> LabelSelector:
    """The API form (``spec.selector``) → selector; ``None`` selects nothing.

    ``{}`` selects everything. Raises ``BadRequest`` for an unknown operator or
    invalid keys/values (upstream: ``"Foo" is not a valid label selector operator``).
    """
    if selector is None:
        return LabelSelector.match_nothing()
    reqs: list[Requirement] = []
    try:
        for key, value in (selector.get("matchLabels") or {}).items():
            reqs.append(Requirement.new(key, Operator.EQUALS, [_string(value)]))
        for expr in selector.get("matchExpressions") or ():
            operator = _string(expr.get("operator", ""))
            if (op := _API_OPS.get(operator)) is None:
                raise ValueError(f"{go_quote(operator)} is not a valid label selector operator")
            values = [_string(v) for v in expr.get("values") or ()]
            reqs.append(Requirement.new(_string(expr.get("key", "")), op, values))
    except ValueError as e:
        raise BadRequest(str(e)) from None
    return LabelSelector.of(reqs)


# Field selectors live in their own module; re-exported for callers of this one.
from k8py.api.field_selectors import (  # noqa: E402
    FieldSelector,
    FieldTerm,
    escape_field_value,
    parse_field_selector,
)
