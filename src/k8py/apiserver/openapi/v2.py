"""The ``/openapi/v2`` document: every served kind's schema, Swagger 2.0.

Why: kubectl still reads v2 where v3 does not reach. Client-side validation
falls back to it for anything the v3 documents cannot vouch for, and a
``kind: List`` (what ``kubectl get -o yaml`` prints for several objects) is
always validated that way: without ``/openapi/v2`` ``kubectl apply -f`` of
such a file stops with "error validating data: the server could not find the
requested resource". ``kubectl explain --output plaintext-openapiv2`` reads it
too.

kubectl asks with ``Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf``
and parses the answer as gnostic's ``openapi_v2.Document`` protobuf message; a
JSON answer to that request is a parse error, so the media type decides the
encoding: that protobuf for the protobuf Accept, the Swagger JSON otherwise.

What is in it: ``swagger``, ``info`` and ``definitions`` (the union of every
group-version document's ``components.schemas``, which already carry the
``x-kubernetes-group-version-kind`` tags kubectl looks kinds up by). ``paths``
are left empty: no v2 reader in kubectl 1.32 uses them, and the v3 documents
list the operations.

Invariants kubectl's parser (kube-openapi ``proto.NewOpenAPIData``) enforces,
any one of which, broken, fails the whole document for every command: a
``$ref`` points into ``#/definitions/`` at a name that exists and has no
``type`` or ``properties`` beside it; a schema has at most one ``type``, one of
the six JSON types; an ``array`` has exactly one ``items`` schema. The
conversion from v3 keeps to them whatever a custom resource's schema says.
"""

from __future__ import annotations

import struct
from typing import Any

import orjson

from k8py.api import schema as upstream

__all__ = ["PROTOBUF_MEDIA_TYPE", "wants_protobuf", "swagger_document", "encode_document"]

# what the answer says it is: Go's mime parser (kubectl) refuses the "@" of the
# older name that kubectl still asks for
PROTOBUF_MEDIA_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
_ACCEPTED = ("com.github.proto-openapi.spec.v2@v1.0+protobuf", "com.github.proto-openapi.spec.v2.v1.0+protobuf")


def wants_protobuf(accept: str | None) -> bool:
    """Whether an ``Accept`` header asks for the protobuf encoding."""
    return bool(accept) and any(media in accept for media in _ACCEPTED)

Schema = dict[str, Any]

_V3_PREFIX = "#/components/schemas/"
_V2_PREFIX = "#/definitions/"
_TYPES = frozenset({"object", "array", "string", "number", "integer", "boolean"})


# -- v3 schemas → Swagger 2.0 schemas ------------------------------------------

def swagger_document(component_sets: list[dict[str, Schema]]) -> Schema:
    """The Swagger 2.0 document from the ``components.schemas`` of each
    group-version document (a name in two sets is the same schema)."""
    merged: dict[str, Schema] = {}
    for components in component_sets:
        merged.update(components)
    known = set(merged)
    definitions = {name: _convert(schema, known) for name, schema in sorted(merged.items())}
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": f"v{upstream.KUBERNETES_VERSION}"},
        "paths": {},
        "definitions": definitions,
    }


def _convert(schema: Any, known: set[str]) -> Schema:
    if not isinstance(schema, dict):
        return {}
    ref = _lifted_ref(schema)
    if ref is not None:
        name = ref[len(_V3_PREFIX):] if ref.startswith(_V3_PREFIX) else None
        if name in known:
            # a reference carries nothing but its description beside it
            out: Schema = {"$ref": _V2_PREFIX + name}
            if isinstance(schema.get("description"), str):
                out["description"] = schema["description"]
            return out
        schema = {k: v for k, v in schema.items() if k not in ("$ref", "allOf")}  # dangling: arbitrary
    out = {}
    for key, value in schema.items():
        if key in ("$ref", "oneOf", "anyOf", "not", "nullable"):
            continue  # not in Swagger 2.0's Schema
        if key == "allOf":
            if isinstance(value, list):
                out["allOf"] = [_convert(v, known) for v in value]
        elif key == "type":
            kept = [t for t in (value if isinstance(value, list) else [value]) if t in _TYPES]
            if kept:
                out["type"] = kept[0]
        elif key == "properties" and isinstance(value, dict):
            out["properties"] = {name: _convert(prop, known) for name, prop in value.items()}
        elif key == "items":
            first = value[0] if isinstance(value, list) and value else value
            out["items"] = _convert(first, known)
        elif key == "additionalProperties":
            out["additionalProperties"] = value if isinstance(value, bool) else _convert(value, known)
        else:
            out[key] = value
    if out.get("type") == "array" and "items" not in out:
        out["items"] = {}
    if "type" in out and out["type"] != "object" and "properties" in out:
        del out["properties"]
    return out


def _lifted_ref(schema: Schema) -> str | None:
    """The reference a v3 schema stands for: ``$ref`` itself, or the
    ``allOf: [{$ref}]`` wrapper v3 needs to put siblings beside one."""
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return ref
    all_of = schema.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], dict):
        only = all_of[0]
        if set(only) == {"$ref"} and isinstance(only["$ref"], str):
            return only["$ref"]
    return None


# -- gnostic's openapi_v2 protobuf messages -------------------------------------
# Field numbers from gnostic-models openapiv2/OpenAPIv2.proto (Document, Info,
# Definitions, NamedSchema, Schema, TypeItem, ItemsItem, Properties,
# AdditionalPropertiesItem, NamedAny, Any).

_SCHEMA_STRINGS = {"$ref": 1, "format": 2, "title": 3, "description": 4, "pattern": 13, "discriminator": 26}
_SCHEMA_DOUBLES = {"multipleOf": 6, "maximum": 7, "minimum": 9}
_SCHEMA_BOOLS = {"exclusiveMaximum": 8, "exclusiveMinimum": 10, "uniqueItems": 16, "readOnly": 27}
_SCHEMA_INTS = {"maxLength": 11, "minLength": 12, "maxItems": 14, "minItems": 15,
                "maxProperties": 17, "minProperties": 18}
_SCHEMA_ANYS = {"default": 5, "example": 30}


def encode_document(document: Schema) -> bytes:
    """``document`` (as :func:`swagger_document` builds it) as an
    ``openapi_v2.Document`` message."""
    info = document.get("info") or {}
    info_bytes = _string(1, info.get("title", "")) + _string(2, info.get("version", ""))
    definitions = b"".join(
        _message(1, _string(1, name) + _message(2, _schema(schema)))
        for name, schema in document.get("definitions", {}).items()
    )
    return (_string(1, document.get("swagger", "2.0")) + _message(2, info_bytes)
            + _message(8, b"") + _message(9, definitions))


def _schema(schema: Schema) -> bytes:
    parts: list[bytes] = []
    for key, value in schema.items():
        if key in _SCHEMA_STRINGS and isinstance(value, str):
            parts.append(_string(_SCHEMA_STRINGS[key], value))
        elif key in _SCHEMA_DOUBLES and isinstance(value, (int, float)) and not isinstance(value, bool):
            parts.append(_key(_SCHEMA_DOUBLES[key], 1) + struct.pack("<d", float(value)))
        elif key in _SCHEMA_BOOLS and isinstance(value, bool):
            parts.append(_varint_field(_SCHEMA_BOOLS[key], int(value)))
        elif key in _SCHEMA_INTS and isinstance(value, int) and not isinstance(value, bool):
            parts.append(_varint_field(_SCHEMA_INTS[key], value & 0xFFFFFFFFFFFFFFFF))
        elif key in _SCHEMA_ANYS:
            parts.append(_message(_SCHEMA_ANYS[key], _any(value)))
        elif key == "required" and isinstance(value, list):
            parts.extend(_string(19, str(v)) for v in value)
        elif key == "enum" and isinstance(value, list):
            parts.extend(_message(20, _any(v)) for v in value)
        elif key == "additionalProperties":
            item = _varint_field(2, int(value)) if isinstance(value, bool) else _message(1, _schema(value))
            parts.append(_message(21, item))
        elif key == "type":
            parts.append(_message(22, _string(1, value)))
        elif key == "items":
            parts.append(_message(23, _message(1, _schema(value))))
        elif key == "allOf":
            parts.extend(_message(24, _schema(v)) for v in value)
        elif key == "properties":
            props = b"".join(_message(1, _string(1, name) + _message(2, _schema(prop)))
                             for name, prop in value.items())
            parts.append(_message(25, props))
        elif key.startswith("x-"):
            parts.append(_message(31, _string(1, key) + _message(2, _any(value))))
    return b"".join(parts)


def _any(value: Any) -> bytes:
    # gnostic's Any keeps the value as YAML text; JSON is YAML
    return _string(2, orjson.dumps(value).decode())


def _key(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _varint_field(number: int, value: int) -> bytes:
    return _key(number, 0) + _varint(value)


def _message(number: int, payload: bytes) -> bytes:
    return _key(number, 2) + _varint(len(payload)) + payload


def _string(number: int, value: str) -> bytes:
    return _message(number, value.encode())
