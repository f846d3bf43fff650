"""Structural OpenAPI v3 schemas of custom resources: pruning, defaults, validation.

What upstream's apiextensions-apiserver does with a CRD version's
``openAPIV3Schema`` on every write, with its messages:

- :func:`unknown_fields` finds (and optionally prunes) fields the schema does
  not declare — unless ``x-kubernetes-preserve-unknown-fields: true`` keeps
  them; ``apiVersion``, ``kind`` and ``metadata`` at the root (and in an
  ``x-kubernetes-embedded-resource``) are always kept;
- :func:`apply_defaults` fills ``default`` values of missing (or null and not
  nullable) properties, recursing into objects, arrays and maps;
- :func:`validate` checks types, ``x-kubernetes-int-or-string``, nullable,
  enum, pattern, format, min/max (exclusive too), multipleOf, lengths, item
  and property counts, uniqueItems, required, additionalProperties and
  allOf/anyOf/oneOf/not, giving causes worded as upstream's
  (``spec.replicas in body should be greater than or equal to 1``).

Invariant: the functions never look outside the schema they are given (no
``$ref``: structural schemas have none).
"""

from __future__ import annotations

import copy
import re
from typing import Any

from k8py.api.errors import Cause
from k8py.api.names import go_quote
from k8py.apiserver.validation.field import invalid, not_supported, render, required

__all__ = ["unknown_fields", "apply_defaults", "validate"]

Schema = dict[str, Any]

_ROOT_KEPT = ("apiVersion", "kind", "metadata")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _properties(schema: Schema) -> dict[str, Schema]:
    props = schema.get("properties")
    return props if isinstance(props, dict) else {}


# -- pruning -------------------------------------------------------------------


def unknown_fields(obj: Any, schema: Schema, *, prune: bool) -> list[str]:
    """``unknown field "spec.foo"`` for each field the schema does not declare
    (removed from ``obj`` when ``prune``)."""
    out: list[str] = []
    _unknown(obj, schema, "", out, prune, root=True)
    return [f'unknown field "{p}"' for p in out]


def _unknown(value: Any, schema: Schema, path: str, out: list[str], prune: bool, *, root: bool = False) -> None:
    if not isinstance(schema, dict):
        return
    if isinstance(value, dict):
        props = _properties(schema)
        additional = schema.get("additionalProperties")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields") is True
        embedded = root or schema.get("x-kubernetes-embedded-resource") is True
        for key in list(value):
            if embedded and key in _ROOT_KEPT and key not in props:
                continue
            if key in props:
                _unknown(value[key], props[key], _join(path, key), out, prune)
            elif isinstance(additional, dict):
                _unknown(value[key], additional, _join(path, key), out, prune)
            elif additional is True or preserve:
                continue
            else:
                out.append(_join(path, key))
                if prune:
                    del value[key]
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            _unknown(item, schema["items"], f"{path}[{i}]", out, prune)


# -- defaults ------------------------------------------------------------------


def apply_defaults(value: Any, schema: Schema) -> None:
    """Fill ``default`` values in place."""
    if not isinstance(schema, dict):
        return
    if isinstance(value, dict):
        props = _properties(schema)
        for key, sub in props.items():
            if not isinstance(sub, dict) or "default" not in sub:
                continue
            if key not in value or (value[key] is None and not sub.get("nullable")):
                value[key] = copy.deepcopy(sub["default"])
        for key, item in value.items():
            if key in props:
                apply_defaults(item, props[key])
            elif isinstance(schema.get("additionalProperties"), dict):
                apply_defaults(item, schema["additionalProperties"])
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            apply_defaults(item, schema["items"])


# -- validation ----------------------------------------------------------------


def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _type_ok(value: Any, expected: str) -> bool:
    actual = _type_of(value)
    if expected == actual:
        return True
    if expected == "number" and actual == "integer":
        return True
    if expected == "integer" and isinstance(value, float) and value.is_integer():
        return True
    return False


def _type_error(path: str, value: Any, expected: str) -> Cause:
    actual = _type_of(value)
    return Cause("FieldValueTypeInvalid",
                 f"Invalid value: {go_quote(actual)}: {path} in body must be of type {expected}: {go_quote(actual)}", path)


def _num(n: Any) -> str:
    if isinstance(n, float) and n.is_integer():
        return str(int(n))
    return str(n)


_FORMATS: dict[str, re.Pattern[str]] = {
    "date-time": re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$"),
    "date": re.compile(r"^\d{4}-\d{2}-\d{2}$"),
    "uuid": re.compile(r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$"),
    "ipv4": re.compile(r"^((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$"),
    "email": re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$"),
    "hostname": re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"),
    "byte": re.compile(r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"),
}


def validate(obj: Any, schema: Schema) -> list[Cause]:
    """Every violation of ``schema`` in ``obj`` (the root's metadata is ObjectMeta's business)."""
    causes: list[Cause] = []
    _validate(obj, schema, "", causes, root=True)
    return causes


def _validate(value: Any, schema: Schema, path: str, causes: list[Cause], *, root: bool = False) -> None:
    if not isinstance(schema, dict):
        return
    name = path or "body"
    if value is None:
        if schema.get("nullable") or not schema.get("type") and not schema.get("x-kubernetes-int-or-string"):
            return
        causes.append(_type_error(name, value, schema.get("type") or "string"))
        return
    expected = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        if not (_type_ok(value, "integer") or isinstance(value, str)):
            causes.append(_type_error(name, value, "integer or string"))
            return
    elif expected and not _type_ok(value, expected):
        causes.append(_type_error(name, value, expected))
        return
    _check_scalar(value, schema, name, causes)
    if isinstance(value, dict):
        _check_object(value, schema, path, causes, root)
    elif isinstance(value, list):
        _check_array(value, schema, path, causes)
    for key in ("allOf", "anyOf", "oneOf"):
        subs = schema.get(key)
        if isinstance(subs, list):
            _check_combinator(key, value, subs, name, causes)
    if isinstance(schema.get("not"), dict):
        probe: list[Cause] = []
        _validate(value, schema["not"], path, probe)
        if not probe:
            causes.append(invalid(name, value, f"{name} in body must not match the schema in \"not\""))


def _check_combinator(key: str, value: Any, subs: list[Schema], name: str, causes: list[Cause]) -> None:
    results = []
    for sub in subs:
        probe: list[Cause] = []
        _validate(value, sub, name if name != "body" else "", probe)
        results.append(probe)
    if key == "allOf":
        for probe in results:
            causes.extend(probe)
        return
    passing = sum(1 for probe in results if not probe)
    if key == "anyOf" and passing == 0:
        causes.append(invalid(name, value, f'{name} in body must validate at least one schema (anyOf)'))
        for probe in results:
            causes.extend(probe)
    elif key == "oneOf" and passing != 1:
        causes.append(invalid(name, value, f"{name} in body must validate one and only one schema (oneOf)"))


def _check_scalar(value: Any, schema: Schema, name: str, causes: list[Cause]) -> None:
    enum = schema.get("enum")
    if isinstance(enum, list) and value not in enum:
        causes.append(not_supported(name, value, [render(v) if not isinstance(v, str) else v for v in enum]))
    if isinstance(value, str):
        pattern = schema.get("pattern")
        if isinstance(pattern, str) and not re.search(pattern, value):
            causes.append(invalid(name, value, f"{name} in body should match '{pattern}'"))
        if "maxLength" in schema and len(value) > int(schema["maxLength"]):
            causes.append(Cause("FieldValueTooLong", f"Too long: may not be more than {int(schema['maxLength'])} bytes", name))
        if "minLength" in schema and len(value) < int(schema["minLength"]):
            causes.append(invalid(name, value, f"{name} in body should be at least {int(schema['minLength'])} chars long"))
        fmt = _FORMATS.get(str(schema.get("format") or ""))
        if fmt is not None and not fmt.match(value):
            causes.append(invalid(name, value, f"{name} in body must be of type {schema['format']}: {go_quote(value)}"))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema:
            low = schema["minimum"]
            if schema.get("exclusiveMinimum") is True and value <= low:
                causes.append(invalid(name, value, f"{name} in body should be greater than {_num(low)}"))
            elif value < low:
                causes.append(invalid(name, value, f"{name} in body should be greater than or equal to {_num(low)}"))
        if "maximum" in schema:
            high = schema["maximum"]
            if schema.get("exclusiveMaximum") is True and value >= high:
                causes.append(invalid(name, value, f"{name} in body should be less than {_num(high)}"))
            elif value > high:
                causes.append(invalid(name, value, f"{name} in body should be less than or equal to {_num(high)}"))
        step = schema.get("multipleOf")
        if step and (value / step) != int(value / step):
            causes.append(invalid(name, value, f"{name} in body should be a multiple of {_num(step)}"))


def _check_object(value: dict[str, Any], schema: Schema, path: str, causes: list[Cause], root: bool) -> None:
    name = path or "body"
    for key in schema.get("required") or []:
        if key not in value:
            causes.append(required(_join(path, key)))
    if "maxProperties" in schema and len(value) > int(schema["maxProperties"]):
        causes.append(Cause("FieldValueTooMany",
                            f"Too many: {len(value)}: must have at most {int(schema['maxProperties'])} items", name))
    if "minProperties" in schema and len(value) < int(schema["minProperties"]):
        causes.append(invalid(name, len(value), f"{name} in body should have at least {int(schema['minProperties'])} properties"))
    props = _properties(schema)
    additional = schema.get("additionalProperties")
    for key, item in value.items():
        if root and key in _ROOT_KEPT:
            continue
        sub = props.get(key)
        if sub is None and isinstance(additional, dict):
            sub = additional
        if sub is not None:
            _validate(item, sub, _join(path, key), causes)
        elif additional is False and not props:
            causes.append(Cause("FieldValueForbidden", f"Forbidden: {key} is not allowed", _join(path, key)))


def _check_array(value: list[Any], schema: Schema, path: str, causes: list[Cause]) -> None:
    name = path or "body"
    if "maxItems" in schema and len(value) > int(schema["maxItems"]):
        causes.append(Cause("FieldValueTooMany", f"Too many: {len(value)}: must have at most {int(schema['maxItems'])} items", name))
    if "minItems" in schema and len(value) < int(schema["minItems"]):
        causes.append(invalid(name, len(value), f"{name} in body should have at least {int(schema['minItems'])} items"))
    if schema.get("uniqueItems") is True:
        seen: list[Any] = []
        for item in value:
            if item in seen:
                causes.append(Cause("FieldValueDuplicate", f"Duplicate value: {render(item)}", name))
                break
            seen.append(item)
    items = schema.get("items")
    if isinstance(items, dict):
        for i, item in enumerate(value):
            _validate(item, items, f"{path}[{i}]", causes)


