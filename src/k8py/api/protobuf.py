"""Kubernetes protobuf bodies, decoded to the JSON-shaped dicts k8py works on.

Why: kubectl (1.32) sends its generator commands (``create deployment``,
``create configmap``, ``create secret`` ...) as
``application/vnd.kubernetes.protobuf`` and never falls back to JSON. Replies
can stay JSON (kubectl's ``Accept`` lists it), so only decoding is needed.

The wire format (upstream's ``runtime/serializer/protobuf``): the 4-byte magic
``k8s\\x00``, then a ``runtime.Unknown`` whose ``typeMeta`` names the object's
``apiVersion``/``kind`` and whose ``raw`` is the object's own message. Message
layouts come from :file:`protobuf_fields.json`, generated from upstream's
``generated.proto`` by ``scripts/gen_protobuf_fields.py``; each entry is
``message -> {number: [json_name, kind, type, label]}`` where

- ``kind`` is a protobuf scalar type (``string``, ``int64``, ``bytes`` ...),
  ``message`` (``type`` is its full name), ``map`` (string keys; ``type`` is the
  value's scalar type or message) or ``inline`` (a Go embedded struct whose
  fields JSON flattens into the parent: ``Volume.volumeSource``);
- ``label`` is :data:`OPTIONAL` (a Go pointer: present means set, even when
  zero), :data:`REPEATED`, or :data:`VALUE` (a Go value field: gogo-protobuf
  writes it always, and its zero value means unset, so it is left out, as
  JSON's ``omitempty`` and upstream's defaulting treat it);
- a message whose only field has the JSON name ``""`` is a Go named slice type
  (``metav1.Verbs``): its JSON form is that field's list.

The result is what upstream's JSON encoding of the same Go object holds: JSON
field names, unset fields left out, ``bytes`` as base64 strings, maps as
objects, and the well-known types in their JSON forms (``Quantity`` as its
string, ``IntOrString`` as an int or a string, ``Time`` as RFC 3339 seconds
(the zero time as ``null``, as Go writes ``creationTimestamp: null``),
``MicroTime`` with microseconds, ``Duration`` as Go's duration string,
``RawExtension``/``FieldsV1`` as the JSON they carry).

Invariants: pure (no I/O beyond reading the packaged table once); any
malformed input raises :class:`ProtobufError` (a ``ValueError``), never
another exception type; unknown field numbers are skipped, as upstream's
generated unmarshallers do.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib import resources
from typing import Any

import orjson

from k8py.api.protobuf_wire import LEN, VARINT, ProtobufError, iter_fields, need_bytes, packed, scalar, signed, text

__all__ = [
    "MAGIC",
    "MEDIA_TYPE",
    "OPTIONAL",
    "REPEATED",
    "VALUE",
    "ProtobufError",
    "Unknown",
    "iter_fields",
    "decode_envelope",
    "decode_object",
    "decode_message",
    "message_name",
    "go_duration",
]

MAGIC = b"k8s\x00"
MEDIA_TYPE = "application/vnd.kubernetes.protobuf"

OPTIONAL, REPEATED, VALUE = 0, 1, 2

_META = "k8s.io.apimachinery.pkg.apis.meta.v1."
_GO_ZERO_TIME = -62135596800  # time.Time{}.Unix(): also the zero time
_MAX_DEPTH = 64  # today's table is acyclic (14 deep); a recursive type would need this bound

Table = dict[str, dict[int, tuple[str, str, Any, int]]]


# -- the field table ----------------------------------------------------------


@functools.cache
def _table() -> Table:
    raw = orjson.loads((resources.files(__package__) / "protobuf_fields.json").read_bytes())
    messages = raw["messages"]
    return {name: {int(num): tuple(spec) for num, spec in fields.items()} for name, fields in messages.items()}


def message_name(api_version: str, kind: str) -> str | None:
    """The protobuf message for ``apiVersion``/``kind``, if the table has it.

    Upstream's packages are ``k8s.io.api.<group's first label>.<version>``
    (``core`` for the legacy group); the option kinds (``DeleteOptions`` ...)
    that every group version registers live in meta/v1.
    """
    group, _, version = api_version.rpartition("/")
    if not version or not kind:
        return None
    package = group.split(".", 1)[0] or "core"
    table = _table()
    for candidate in (f"k8s.io.api.{package}.{version}.{kind}", f"{_META}{kind}"):
        if candidate in table:
            return candidate
    return None


# -- well-known types ---------------------------------------------------------


def _fields_by_number(raw: bytes) -> dict[int, int | bytes]:
    return {number: value for number, _, value in iter_fields(raw)}


def _time(raw: bytes, *, micro: bool) -> str | None:
    if not raw:
        return None  # the zero time: JSON null
    fields = _fields_by_number(raw)
    seconds = signed(_int(fields.get(1, 0)), 64)
    nanos = signed(_int(fields.get(2, 0)), 32) if micro else 0  # Time keeps seconds only
    if seconds == _GO_ZERO_TIME and nanos == 0:
        return None
    try:
        moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=seconds, microseconds=nanos // 1000)
    except OverflowError:
        raise ProtobufError(f"time out of range: {seconds}s") from None
    if micro:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _int(value: int | bytes) -> int:
    if isinstance(value, bytes):
        raise ProtobufError("a numeric field arrived length-delimited")
    return value


def _str(value: int | bytes) -> str:
    return text(need_bytes(value))


def go_duration(nanoseconds: int) -> str:
    """Go's ``time.Duration.String()``: ``1h2m3.5s``, ``1.5ms``, ``0s``."""
    if nanoseconds == 0:
        return "0s"
    sign = "-" if nanoseconds < 0 else ""
    u = abs(nanoseconds)
    if u < 1_000_000_000:
        for unit, size in (("ns", 1), ("µs", 1_000), ("ms", 1_000_000)):
            if u < size * 1000:
                return sign + _decimal(u, size) + unit
    hours, rest = divmod(u, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    head = f"{hours}h{minutes}m" if hours else (f"{minutes}m" if minutes else "")
    return sign + head + _decimal(rest, 1_000_000_000) + "s"


def _decimal(value: int, size: int) -> str:
    whole, frac = divmod(value, size)
    if not frac:
        return str(whole)
    digits = len(str(size)) - 1
    return f"{whole}.{frac:0{digits}d}".rstrip("0")


def _quantity(raw: bytes) -> str:
    return _str(_fields_by_number(raw).get(1, b"0")) or "0"


def _int_or_string(raw: bytes) -> int | str:
    fields = _fields_by_number(raw)
    if _int(fields.get(1, 0)) == 1:
        return _str(fields.get(3, b""))
    return signed(_int(fields.get(2, 0)), 32)


def _embedded_json(raw: bytes) -> Any:
    data = need_bytes(_fields_by_number(raw).get(1, b""))
    if not data.strip():
        return None
    try:  # upstream writes these as JSON; a nested protobuf object is refused
        return orjson.loads(data)
    except orjson.JSONDecodeError as err:
        raise ProtobufError(f"an embedded object is not JSON: {err}") from None


_SPECIAL: dict[str, Callable[[bytes], Any]] = {
    "k8s.io.apimachinery.pkg.api.resource.Quantity": _quantity,
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString": _int_or_string,
    f"{_META}Time": lambda raw: _time(raw, micro=False),
    f"{_META}MicroTime": lambda raw: _time(raw, micro=True),
    f"{_META}Duration": lambda raw: go_duration(signed(_int(_fields_by_number(raw).get(1, 0)), 64)),
    f"{_META}FieldsV1": _embedded_json,
    "k8s.io.apimachinery.pkg.runtime.RawExtension": _embedded_json,
}

#: the zero values a VALUE field leaves out (Go's "unset"); ``0`` also matches
#: ``False`` and ``0.0``, and no message value (a dict) equals either
_ZERO: tuple[Any, ...] = ("", 0)


# -- messages -------------------------------------------------------------


def decode_message(raw: bytes, name: str) -> Any:
    """One message (no envelope) as its JSON value."""
    return _message(raw, name, _table(), 0)


def _message(raw: bytes, name: str, table: Table, depth: int) -> Any:
    special = _SPECIAL.get(name)
    if special is not None:
        return special(raw)
    fields = table.get(name)
    if fields is None:
        raise ProtobufError(f"no field table for message {name}")
    if depth > _MAX_DEPTH:
        raise ProtobufError("objects nested too deeply")
    out: dict[str, Any] = {}
    for number, wire, value in iter_fields(raw):
        spec = fields.get(number)
        if spec is None:
            continue
        json_name, kind, type_, label = spec
        if kind == "message" or kind == "inline":
            item = _message(need_bytes(value), type_, table, depth + 1)
        elif kind == "map":
            key, item = _map_entry(need_bytes(value), type_, table, depth)
            out.setdefault(json_name, {})[key] = item
            continue
        elif label == REPEATED and wire == LEN and kind not in ("string", "bytes"):
            out.setdefault(json_name, []).extend(packed(kind, need_bytes(value)))
            continue
        else:
            item = scalar(kind, wire, value)
        if label == REPEATED:
            out.setdefault(json_name, []).append(item)
        elif kind == "inline":
            out.update(item)
        elif label == VALUE and item in _ZERO:
            out.pop(json_name, None)  # unset; the last occurrence wins, as in protobuf
        else:  # None stays: the zero Time is JSON null (``creationTimestamp: null``)
            out[json_name] = item
    if len(fields) == 1:
        ((only, _, _, _),) = fields.values()
        if only == "":  # a Go named slice type: its JSON form is the list
            return out.get("", [])
    return out


def _map_entry(raw: bytes, value_type: str, table: Table, depth: int) -> tuple[str, Any]:
    key = ""
    item: Any = None
    for number, wire, value in iter_fields(raw):
        if number == 1:
            key = _str(value)
        elif number == 2:
            if value_type in table or value_type in _SPECIAL:
                item = _message(need_bytes(value), value_type, table, depth + 1)
            else:
                item = scalar(value_type, wire, value)
    if item is None:  # an entry without a value holds the value type's zero
        item = _message(b"", value_type, table, depth + 1) if (value_type in table or value_type in _SPECIAL) else _scalar_zero(value_type)
    return key, item


def _scalar_zero(kind: str) -> Any:
    if kind == "string" or kind == "bytes":
        return ""
    return scalar(kind, VARINT, 0)


# -- the envelope -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Unknown:
    """``runtime.Unknown``: what every Kubernetes protobuf body is wrapped in."""

    api_version: str
    kind: str
    raw: bytes
    content_encoding: str = ""
    content_type: str = ""


def decode_envelope(body: bytes) -> Unknown:
    if not body.startswith(MAGIC):
        raise ProtobufError("the body does not start with the Kubernetes protobuf prefix k8s\\x00")
    api_version = kind = encoding = content_type = ""
    raw = b""
    for number, _, value in iter_fields(body[len(MAGIC) :]):
        if number == 1:
            type_meta = _fields_by_number(need_bytes(value))
            api_version = _str(type_meta.get(1, b""))
            kind = _str(type_meta.get(2, b""))
        elif number == 2:
            raw = need_bytes(value)
        elif number == 3:
            encoding = _str(value)
        elif number == 4:
            content_type = _str(value)
    return Unknown(api_version, kind, raw, encoding, content_type)


def decode_object(body: bytes) -> dict[str, Any]:
    """A whole protobuf body (magic + ``runtime.Unknown``) as a JSON-shaped object."""
    envelope = decode_envelope(body)
    if envelope.content_encoding:
        raise ProtobufError(f"unsupported content encoding {envelope.content_encoding!r}")
    if not envelope.kind:
        raise ProtobufError("the protobuf envelope names no kind")
    name = message_name(envelope.api_version, envelope.kind)
    if name is None:
        raise ProtobufError(f"no protobuf message is known for {envelope.api_version or '<no apiVersion>'}, Kind={envelope.kind}")
    decoded = decode_message(envelope.raw, name)
    return {"apiVersion": envelope.api_version, "kind": envelope.kind, **decoded}
