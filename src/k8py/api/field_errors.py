"""Field errors rendered as apimachinery's ``field.Error.ErrorBody()`` prints them.

Why: a validation failure reaches kubectl as a ``Status`` whose
``details.causes[].message`` clients show verbatim, so the body must read as
upstream's does: ``Invalid value: "Foo": <detail>``, ``Required value``,
``Forbidden: <detail>``, ``Too long: may not be more than 63 bytes``, with the
bad value printed the way Go's ``%q``/``%v`` would (:func:`go_value`).

:mod:`k8py.api.names` re-exports every name here (its validators build these
causes), so existing imports from there keep working.

Invariant: pure functions, no I/O; each helper returns one
:class:`~k8py.api.errors.Cause` whose ``reason`` is upstream's ``CauseType``.
"""

from __future__ import annotations

import json
from typing import Any

from k8py.api.errors import Cause

__all__ = ["field_invalid", "field_required", "field_forbidden", "field_too_long", "go_quote", "go_value"]


_GO_ESCAPES = {'"': '\\"', "\\": "\\\\", "\a": "\\a", "\b": "\\b", "\f": "\\f",
               "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def go_quote(s: str) -> str:
    """Go's ``%q`` (``strconv.Quote``): printable Unicode kept, the rest escaped."""
    out = []
    for ch in s:
        if ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


def go_value(value: Any) -> str:
    """A bad value as ``field.Error`` prints it: ``"x"``, ``-1``, ``[]string{"a"}``.

    Other shapes (objects) are shown as compact JSON; Go would print its
    struct syntax, which no client parses.
    """
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if value is None:
        return "null"
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        if not value:
            return "[]string(nil)"
        return "[]string{" + ", ".join(go_quote(v) for v in value) + "}"
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _with_detail(body: str, detail: str) -> str:
    return f"{body}: {detail}" if detail else body


def field_invalid(field: str, value: Any, detail: str) -> Cause:
    return Cause(
        "FieldValueInvalid", _with_detail(f"Invalid value: {go_value(value)}", detail), field
    )


def field_required(field: str, detail: str = "") -> Cause:
    return Cause("FieldValueRequired", _with_detail("Required value", detail), field)


def field_forbidden(field: str, detail: str) -> Cause:
    return Cause("FieldValueForbidden", _with_detail("Forbidden", detail), field)


def field_too_long(field: str, max_bytes: int) -> Cause:
    return Cause(
        "FieldValueTooLong", f"Too long: may not be more than {max_bytes} bytes", field
    )
