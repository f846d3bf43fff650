"""A JSON value as a CRD rule sees it under its schema: typed formats, escaped names.

Rules are type-checked against the schema's CEL types
(:mod:`k8py.apiserver.cel.schema_types`): a ``string`` with format
``date-time``/``date`` is a ``timestamp``, ``duration`` a ``duration``,
``byte`` ``bytes``, and a property ``foo-bar`` is read as
``self.foo__dash__bar``. Upstream's ``UnstructuredToVal`` gives the values
those types when a rule runs; :func:`converter` does the same for the JSON
the API server holds, before the activation is bound.

Invariant: :func:`converter` returns None for a schema with nothing to
convert anywhere below it (the common case), so those rules run on the
stored JSON as it is, with no copy. A value that does not parse as its
format (which schema validation reports on its own) is left a string.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import re
from typing import Any, Callable

from k8py.apiserver.cel.names import property_name

__all__ = ["converter", "parse_duration"]

Schema = dict[str, Any]
Convert = Callable[[Any], Any]

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h|d|w)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0,
                 "d": 86400.0, "w": 604800.0}


def parse_duration(text: str) -> datetime.timedelta | None:
    """Go's ``time.ParseDuration`` (plus ``d`` and ``w``, as strfmt's); None when it is not one."""
    body = text.strip()
    sign = -1 if body.startswith("-") else 1
    body = body.lstrip("+-")
    if body == "0":
        return datetime.timedelta(0)
    if not body:
        return None
    seconds, position = 0.0, 0
    while position < len(body):
        match = _DURATION_PART.match(body, position)
        if not match:
            return None
        seconds += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position = match.end()
    return datetime.timedelta(seconds=sign * seconds)


def _timestamp(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        parsed = datetime.datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError:
        return value
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.timezone.utc)
    from google.protobuf import timestamp_pb2  # (loaded with the CEL engine, on first use: k8py.apiserver.cel)

    message = timestamp_pb2.Timestamp()
    message.FromDatetime(parsed.astimezone(datetime.timezone.utc).replace(tzinfo=None))
    return message


def _duration(value: Any) -> Any:
    parsed = parse_duration(value) if isinstance(value, str) else None
    if parsed is None:
        return value
    from google.protobuf import duration_pb2

    message = duration_pb2.Duration()
    message.FromTimedelta(parsed)
    return message


def _bytes(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return value


_FORMATS: dict[str, Convert] = {"date-time": _timestamp, "date": _timestamp, "duration": _duration, "byte": _bytes}


def converter(schema: Any) -> Convert | None:
    """The conversion of values of ``schema`` into what rules see (None: nothing to convert)."""
    if not isinstance(schema, dict) or schema.get("x-kubernetes-int-or-string"):
        return None
    kind = schema.get("type")
    if kind == "string":
        return _FORMATS.get(str(schema.get("format") or ""))
    if kind == "array":
        return _each_item(converter(schema.get("items")))
    if kind == "object":
        additional = schema.get("additionalProperties")
        if isinstance(additional, dict):
            return _each_value(converter(additional))
        return _fields(schema.get("properties") or {})
    return None


def _each_item(inner: Convert | None) -> Convert | None:
    if inner is None:
        return None
    return lambda value: [inner(v) if v is not None else v for v in value] if isinstance(value, list) else value


def _each_value(inner: Convert | None) -> Convert | None:
    if inner is None:
        return None
    return lambda value: ({k: inner(v) if v is not None else v for k, v in value.items()}
                          if isinstance(value, dict) else value)


def _fields(properties: dict[str, Any]) -> Convert | None:
    fields: dict[str, tuple[str | None, Convert | None]] = {}
    for name, sub in properties.items():
        escaped, inner = property_name(str(name)), converter(sub)
        if escaped != name or inner is not None:
            fields[name] = (escaped, inner)
    if not fields:
        return None

    def convert(value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        out = {}
        for key, item in value.items():
            spec = fields.get(key)
            if spec is None:
                out[key] = item
                continue
            escaped, inner = spec
            if escaped is not None:  # a name that cannot be escaped is not visible to rules
                out[escaped] = inner(item) if inner is not None and item is not None else item
        return out

    return convert
