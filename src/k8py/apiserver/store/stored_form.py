"""The stored form of objects: the bytes a value holds, and the type header.

A stored value is the object's JSON *without* ``metadata.resourceVersion``:
the store's ``mod_revision`` is the resourceVersion, stamped on read, so a
value never disagrees with its own revision. A view of another kind (a
converter on the definition) is converted on the way in and out.
"""

from __future__ import annotations

from typing import Any

import orjson

from k8py.api.errors import BadRequest
from k8py.apiserver.registry import ResourceDefinition, to_served, to_stored
from k8py.storage import KeyValue

__all__ = ["check_type", "decode_stored", "encode_for_store", "load_object", "dump_object",
           "load_object_async", "dump_object_async"]

Object = dict[str, Any]


def decode_stored(kv: KeyValue) -> Object:
    obj = orjson.loads(kv.value)
    obj.setdefault("metadata", {})["resourceVersion"] = str(kv.mod_revision)
    return obj


def encode_for_store(obj: Object) -> bytes:
    meta = obj.get("metadata") or {}
    rv = meta.pop("resourceVersion", None)
    try:
        return orjson.dumps(obj)
    finally:
        if rv is not None:
            meta["resourceVersion"] = rv


def load_object(definition: ResourceDefinition, kv: KeyValue) -> Object:
    """The stored object as ``definition`` serves it (converted for a view)."""
    obj = decode_stored(kv)
    if definition.converter is not None:
        obj = definition.converter.from_storage(obj)
    return obj


def dump_object(definition: ResourceDefinition, obj: Object) -> bytes:
    """The bytes to store for ``obj`` (converted to the stored form for a view)."""
    if definition.converter is not None:
        return encode_for_store(definition.converter.to_storage(obj))
    return encode_for_store(obj)


async def load_object_async(definition: ResourceDefinition, kv: KeyValue) -> Object:
    """:func:`load_object` for any converter, one that does I/O (a CRD's
    conversion webhook) too: what the request path uses."""
    if definition.converter is None:
        return decode_stored(kv)
    return (await to_served(definition, [decode_stored(kv)]))[0]


async def dump_object_async(definition: ResourceDefinition, obj: Object) -> bytes:
    """:func:`dump_object` for any converter (see :func:`load_object_async`)."""
    if definition.converter is None:
        return encode_for_store(obj)
    return encode_for_store((await to_stored(definition, [obj]))[0])


def check_type(definition: ResourceDefinition, obj: Object) -> None:
    """Refuse a body of another kind or version; put ``kind``, ``apiVersion`` first."""
    if not isinstance(obj, dict):
        raise BadRequest("the body of the request must be a JSON object")
    kind = obj.get("kind")
    api_version = obj.get("apiVersion")
    if kind and kind != definition.kind:
        raise BadRequest(
            f"the kind of the object ({kind}) does not match the kind of the URL ({definition.kind})"
        )
    if api_version and api_version != definition.api_version:
        raise BadRequest(
            f"the API version in the data ({api_version}) does not match the expected API version "
            f"({definition.api_version})"
        )
    if list(obj)[:2] != ["kind", "apiVersion"]:  # upstream's field order: kind, apiVersion first
        rest = [(k, v) for k, v in obj.items() if k not in ("kind", "apiVersion")]
        obj.clear()
        obj["kind"] = definition.kind
        obj["apiVersion"] = definition.api_version
        obj.update(rest)
    else:
        obj["kind"] = definition.kind
        obj["apiVersion"] = definition.api_version
