"""Encoding objects and lists for the wire, in the negotiated format.

Lists are assembled from the watch cache's pre-encoded objects without
decoding them (``json_list``); tables and partial-metadata lists need the
decoded objects and go through the printers.
"""

from __future__ import annotations

from typing import Any

import orjson
import yaml
from aiohttp import web

from k8py.apiserver.handlers.codec import JSON, ResponseFormat
from k8py.apiserver.handlers.listing import ListPage
from k8py.apiserver.printers import build_table
from k8py.apiserver.registry import ResourceDefinition

__all__ = ["object_response", "list_response", "json_response", "partial_metadata"]

Object = dict[str, Any]


def json_response(body: bytes, *, status: int = 200, content_type: str = JSON, warnings: list[str] | None = None) -> web.Response:
    response = web.Response(body=body, status=status, headers={"Content-Type": content_type})
    for warning in warnings or ():
        response.headers.add("Warning", warning_header(warning))
    return response


def warning_header(text: str) -> str:
    """RFC 7234 ``Warning`` value, its text a quoted-string (``"`` and ``\\``
    escaped): clients drop a warning that does not parse, and kubectl's
    ``unknown field "x"`` warnings contain quotes."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'299 - "{escaped}"'


def partial_metadata(obj: Object, api_version: str = "meta.k8s.io/v1") -> Object:
    return {"kind": "PartialObjectMetadata", "apiVersion": api_version, "metadata": obj.get("metadata") or {}}


def object_response(
    definition: ResourceDefinition,
    obj: Object,
    fmt: ResponseFormat,
    *,
    status: int = 200,
    warnings: list[str] | None = None,
) -> web.Response:
    if fmt.kind == "table" and obj.get("kind") == definition.kind:
        body = orjson.dumps(
            build_table(definition.group, definition.kind, [obj], list_meta=None, include_object=fmt.include_object,
                        printer=definition.printer)
        )
    elif fmt.kind == "partial" and obj.get("kind") == definition.kind:
        body = orjson.dumps(partial_metadata(obj))
    elif fmt.kind == "yaml":
        return json_response(yaml.safe_dump(obj, sort_keys=False).encode(), status=status, content_type=fmt.content_type, warnings=warnings)
    else:
        body = orjson.dumps(obj)
    return json_response(body, status=status, warnings=warnings)


def _list_meta(page: ListPage) -> Object:
    meta: Object = {"resourceVersion": str(page.resource_version)}
    if page.continue_token:
        meta["continue"] = page.continue_token
        if page.remaining is not None:
            meta["remainingItemCount"] = page.remaining
    return meta


def list_response(definition: ResourceDefinition, page: ListPage, fmt: ResponseFormat) -> web.Response:
    meta = _list_meta(page)
    if fmt.kind == "table":
        objects = [orjson.loads(item) for item in page.items]
        table = build_table(definition.group, definition.kind, objects, list_meta=meta, include_object=fmt.include_object,
                            printer=definition.printer)
        return json_response(orjson.dumps(table))
    if fmt.kind == "partial":
        items = [partial_metadata(orjson.loads(item)) for item in page.items]
        body = orjson.dumps(
            {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": meta, "items": items}
        )
        return json_response(body)
    head = (
        b'{"kind":"'
        + definition.list_kind.encode()
        + b'","apiVersion":"'
        + definition.api_version.encode()
        + b'","metadata":'
        + orjson.dumps(meta)
        + b',"items":['
    )
    body = head + b",".join(page.items) + b"]}"
    if fmt.kind == "yaml":
        return json_response(yaml.safe_dump(orjson.loads(body), sort_keys=False).encode(), content_type=fmt.content_type)
    return json_response(body)
