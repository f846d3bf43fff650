"""The protobuf wire format, as far as Kubernetes objects need it.

Low-level and schema-free: varints, the ``(number, wire type, value)`` fields
of one message (:func:`iter_fields`), scalars by their protobuf type and
packed repeated numbers. :mod:`k8py.api.protobuf` builds objects from these
with the field table. Any malformed input raises :class:`ProtobufError` (a
``ValueError``), never another exception type.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["ProtobufError", "iter_fields", "varint", "signed", "scalar", "packed", "need_bytes", "text",
           "VARINT", "I64", "LEN", "I32"]


class ProtobufError(ValueError):
    """The bytes are not a well-formed Kubernetes protobuf object."""


# -- the wire format ----------------------------------------------------------

VARINT, I64, LEN, I32 = 0, 1, 2, 5


def varint(buf: bytes, pos: int) -> tuple[int, int]:
    if pos < len(buf) and buf[pos] < 0x80:  # the common one-byte case
        return buf[pos], pos + 1
    result = shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise ProtobufError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ProtobufError("varint longer than 10 bytes")


def iter_fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """``(number, wire_type, value)`` for each field of one message.

    ``value`` is an int for varints and fixed-width fields (unsigned, raw
    bits) and ``bytes`` for length-delimited ones. Groups are refused: no
    Kubernetes message uses them.
    """
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = varint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ProtobufError("field number 0")
        if wire == VARINT:
            value, pos = varint(buf, pos)
            yield number, wire, value
        elif wire == LEN:
            size, pos = varint(buf, pos)
            if pos + size > end:
                raise ProtobufError(f"field {number} runs past the end of its message")
            yield number, wire, buf[pos : pos + size]
            pos += size
        elif wire == I64 or wire == I32:
            width = 8 if wire == I64 else 4
            if pos + width > end:
                raise ProtobufError(f"field {number} runs past the end of its message")
            yield number, wire, int.from_bytes(buf[pos : pos + width], "little")
            pos += width
        else:
            raise ProtobufError(f"unsupported wire type {wire} for field {number}")


def signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def zigzag(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ProtobufError(f"a string field is not valid UTF-8: {err}") from None


_NUMERIC: dict[str, Callable[[int], Any]] = {
    "int32": lambda v: signed(v, 32),
    "int64": lambda v: signed(v, 64),
    "uint32": lambda v: v & 0xFFFFFFFF,
    "uint64": lambda v: v,
    "sint32": zigzag,
    "sint64": zigzag,
    "bool": bool,
    "enum": lambda v: signed(v, 32),
    "fixed32": lambda v: v,
    "fixed64": lambda v: v,
    "sfixed32": lambda v: signed(v, 32),
    "sfixed64": lambda v: signed(v, 64),
    "float": lambda v: struct.unpack("<f", v.to_bytes(4, "little"))[0],
    "double": lambda v: struct.unpack("<d", v.to_bytes(8, "little"))[0],
}
_WIDTH = {"fixed32": 4, "sfixed32": 4, "float": 4, "fixed64": 8, "sfixed64": 8, "double": 8}


def scalar(kind: str, wire: int, value: int | bytes) -> Any:
    if kind == "string":
        return text(need_bytes(value))
    if kind == "bytes":
        return base64.b64encode(need_bytes(value)).decode("ascii")
    convert = _NUMERIC.get(kind)
    if convert is None:
        raise ProtobufError(f"unknown scalar type {kind}")
    if isinstance(value, bytes):
        raise ProtobufError(f"a {kind} field arrived length-delimited")
    return convert(value)


def packed(kind: str, raw: bytes) -> list[Any]:
    """A packed repeated numeric field (proto3 style; accepted, as upstream)."""
    convert = _NUMERIC[kind]
    width = _WIDTH.get(kind)
    out: list[Any] = []
    pos = 0
    while pos < len(raw):
        if width:
            if pos + width > len(raw):
                raise ProtobufError("truncated packed field")
            out.append(convert(int.from_bytes(raw[pos : pos + width], "little")))
            pos += width
        else:
            value, pos = varint(raw, pos)
            out.append(convert(value))
    return out


def need_bytes(value: int | bytes) -> bytes:
    if not isinstance(value, bytes):
        raise ProtobufError("a length-delimited field arrived as a number")
    return value
