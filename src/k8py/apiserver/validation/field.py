"""Field errors as apimachinery's ``field.Error`` renders them, plus the small
checks (ports, non-negative numbers, label selectors) every group uses.

Why: kubectl prints ``details.causes`` and the ``Invalid`` message verbatim
(``spec.replicas: Invalid value: -1: must be greater than or equal to 0``), so
the wording and the rendering of the bad value follow upstream's
``ErrorBody``: strings ``%q``, numbers bare, IntOrString unquoted (a
Stringer), maps and selectors in Go ``%#v`` form where clients are likely to
read them, compact JSON for whole structs we cannot render like Go does.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable, Mapping, TypeGuard

from k8py.api.errors import Cause
from k8py.api.names import go_quote, is_qualified_name, validate_labels

__all__ = [
    "Raw", "IntOrString", "render", "go_map", "go_label_selector",
    "required", "invalid", "not_supported", "duplicate", "forbidden", "not_found", "immutable",
    "nonnegative", "port_number", "port_name", "port_num_or_name", "label_selector",
    "is_int", "int_value", "as_dict",
]


class Raw(str):
    """A value already rendered (shown as is, unquoted)."""


class IntOrString(str):
    """An IntOrString value: rendered unquoted, as its Go ``String()`` is."""


def is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` if it is an object, else an empty one (malformed input)."""
    return value if isinstance(value, dict) else {}


def int_value(value: Any, default: int = 0) -> int:
    return value if is_int(value) else default


def go_map(value: Mapping[str, Any] | None) -> str:
    """``map[string]string{"a":"b"}`` (sorted keys, as fmt prints maps)."""
    if value is None:
        return "map[string]string(nil)"
    items = ", ".join(f"{go_quote(str(k))}:{go_quote(str(v))}" for k, v in sorted(value.items()))
    return "map[string]string{" + items + "}"


def go_label_selector(selector: Mapping[str, Any] | None) -> str:
    """``v1.LabelSelector{MatchLabels:..., MatchExpressions:...}`` (%#v)."""
    if selector is None:
        return "null"
    labels = selector.get("matchLabels")
    exprs = selector.get("matchExpressions")
    if exprs:
        rendered = ", ".join(
            "v1.LabelSelectorRequirement{Key:%s, Operator:%s, Values:%s}" % (
                go_quote(str(e.get("key", ""))), go_quote(str(e.get("operator", ""))),
                "[]string{" + ", ".join(go_quote(str(v)) for v in e["values"]) + "}"
                if e.get("values") else "[]string(nil)",
            )
            for e in exprs if isinstance(e, dict)
        )
        exprs_text = "[]v1.LabelSelectorRequirement{" + rendered + "}"
    else:
        exprs_text = "[]v1.LabelSelectorRequirement(nil)"
    return f"v1.LabelSelector{{MatchLabels:{go_map(labels)}, MatchExpressions:{exprs_text}}}"


def render(value: Any) -> str:
    if isinstance(value, (Raw, IntOrString)):
        return str(value)
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if value is None:
        return "null"
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "[]string{" + ", ".join(go_quote(v) for v in value) + "}"
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _body(kind: str, detail: str) -> str:
    return f"{kind}: {detail}" if detail else kind


def required(path: str, detail: str = "") -> Cause:
    return Cause("FieldValueRequired", _body("Required value", detail), path)


def invalid(path: str, value: Any, detail: str = "") -> Cause:
    return Cause("FieldValueInvalid", _body(f"Invalid value: {render(value)}", detail), path)


def not_supported(path: str, value: Any, supported: Iterable[str]) -> Cause:
    quoted = ", ".join(go_quote(s) for s in supported)
    detail = f"supported values: {quoted}" if quoted else ""
    return Cause("FieldValueNotSupported", _body(f"Unsupported value: {render(value)}", detail), path)


def duplicate(path: str, value: Any) -> Cause:
    return Cause("FieldValueDuplicate", f"Duplicate value: {render(value)}", path)


def forbidden(path: str, detail: str) -> Cause:
    return Cause("FieldValueForbidden", _body("Forbidden", detail), path)


def not_found(path: str, value: Any) -> Cause:
    return Cause("FieldValueNotFound", f"Not found: {render(value)}", path)


def immutable(path: str, value: Any) -> Cause:
    """Upstream ``ValidateImmutableField``."""
    return invalid(path, value, "field is immutable")


def nonnegative(value: Any, path: str) -> list[Cause]:
    if is_int(value) and value < 0:
        return [invalid(path, value, "must be greater than or equal to 0")]
    return []


_RANGE = "must be between 1 and 65535, inclusive"


def port_number(value: Any, path: str) -> list[Cause]:
    if not is_int(value) or not 1 <= value <= 65535:
        return [invalid(path, value, _RANGE)]
    return []


_PORT_NAME_CHARS = re.compile(r"[-a-z0-9]+")
_PORT_NAME_LETTER = re.compile(r".*[a-z]")


def port_name(name: str) -> list[str]:
    """Upstream ``IsValidPortName`` (IANA_SVC_NAME) messages."""
    errs = []
    if len(name) > 15:
        errs.append("must be no more than 15 characters")
    if not _PORT_NAME_CHARS.fullmatch(name):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not _PORT_NAME_LETTER.match(name):
        errs.append("must contain at least one letter (a-z)")
    if "--" in name:
        errs.append("must not contain consecutive hyphens")
    if name.startswith("-") or name.endswith("-"):
        errs.append("must not begin or end with a hyphen")
    return errs


def port_num_or_name(value: Any, path: str) -> list[Cause]:
    if is_int(value):
        return port_number(value, path)
    if isinstance(value, str):
        return [invalid(path, value, m) for m in port_name(value)]
    return [invalid(path, value, _RANGE)]


_SELECTOR_OPS = ("In", "NotIn", "Exists", "DoesNotExist")


def label_selector(selector: Any, path: str) -> list[Cause]:
    """Upstream ``ValidateLabelSelector`` (strict label values)."""
    if not isinstance(selector, dict):
        return []
    causes = validate_labels(selector.get("matchLabels"), f"{path}.matchLabels")
    for i, expr in enumerate(selector.get("matchExpressions") or ()):
        p = f"{path}.matchExpressions[{i}]"
        if not isinstance(expr, dict):
            continue
        op, values = expr.get("operator", ""), expr.get("values") or []
        if op in ("In", "NotIn"):
            if not values:
                causes.append(required(f"{p}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
        elif op in ("Exists", "DoesNotExist"):
            if values:
                causes.append(forbidden(f"{p}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
        else:
            causes.append(invalid(f"{p}.operator", op, "not a valid selector operator"))
        key = expr.get("key", "")
        causes.extend(invalid(f"{p}.key", key, m) for m in is_qualified_name(str(key)))
    return causes
