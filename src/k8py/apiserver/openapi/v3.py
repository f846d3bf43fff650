"""The ``/openapi/v3`` documents, built from the registry and upstream schemas.

Why: kubectl reads these before it writes anything. ``create``/``apply``
delegate validation to the server (``fieldValidation=Strict``) only when the
group-version document has a PATCH operation tagged with the kind's
``x-kubernetes-group-version-kind`` that lists a ``fieldValidation`` query
parameter; client-side apply takes ``x-kubernetes-patch-merge-key`` /
``-strategy`` from the schemas to build its strategic merge patch; and
``kubectl explain`` prints the schemas' descriptions. A partial document is
worse than none (kubectl then sends whole lists instead of merge patches), so
each document carries the full transitive closure of the schemas it names.

Shape (as upstream serves it):

* root: ``{"paths": {"api/v1": {"serverRelativeURL": "/openapi/v3/api/v1?hash=H"}, ...}}``
  where ``H`` is the SHA-512 of the group-version document (clients cache by it);
* a group-version document: ``openapi: 3.0.0``, ``info``, ``paths`` (list,
  create, deletecollection, read, replace, patch, delete per resource, the
  all-namespaces list for namespaced kinds, ``/status`` and ``/scale``) and
  ``components.schemas``.

Schemas come from :mod:`k8py.api.schema` (JSON-Schema form) and are converted
here: ``#/$defs/`` → ``#/components/schemas/``, ``["string","null"]`` →
``"string"``, a ``$ref`` with siblings becomes ``allOf: [{$ref}]`` plus the
siblings (``$ref`` siblings are ignored in OpenAPI 3.0), IntOrString and
Quantity get upstream's ``type: string`` form; descriptions, formats, enums and
``x-kubernetes-*`` extensions are kept. A resource with no upstream schema gets
a permissive object schema (``x-kubernetes-preserve-unknown-fields``) tagged
with its GVK.

Invariant: the cache is valid for one ``registry.generation``; any
``registry.add`` (custom resources at run time) rebuilds everything on the
next call. Documents are immutable bytes once built, safe to share.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from k8py.api import schema as upstream
from k8py.apiserver.openapi.paths import PATCH_CONTENT_TYPES, resource_paths
from k8py.apiserver.openapi.v2 import encode_document, swagger_document
from k8py.apiserver.registry import Registry, ResourceDefinition

__all__ = ["OpenAPIService", "convert_schema", "schema_name_for", "gv_path"]

Schema = dict[str, Any]

_REF_PREFIX = "#/$defs/"
_COMPONENT_PREFIX = "#/components/schemas/"
# Definitions every document needs for its operations (bodies and responses).
_META = "io.k8s.apimachinery.pkg.apis.meta.v1."
_COMMON = (_META + "Status", _META + "DeleteOptions", _META + "Patch", _META + "WatchEvent")
_SCALE = "io.k8s.api.autoscaling.v1.Scale"
_INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"


def gv_path(group: str, version: str) -> str:
    """``api/v1`` or ``apis/apps/v1``: the key in the root document."""
    return f"apis/{group}/{version}" if group else f"api/{version}"


def schema_name_for(definition: ResourceDefinition) -> str:
    """The component name of a resource's schema (upstream's, or a synthetic
    ``<reversed group>.<version>.<Kind>`` for kinds with no upstream schema)."""
    if definition.openapi_name:
        return definition.openapi_name
    name = upstream.gvk_definition_name(definition.group, definition.version, definition.kind)
    if name:
        return name
    return _synthetic_name(definition.group, definition.version, definition.kind)


def _synthetic_name(group: str, version: str, kind: str) -> str:
    # upstream names CRD schemas by reversed group: com.example.stable.v1.CronTab
    reversed_group = ".".join(reversed(group.split("."))) if group else "core"
    return f"{reversed_group}.{version}.{kind}"


def _convert_ref(ref: str) -> str:
    return _COMPONENT_PREFIX + ref[len(_REF_PREFIX):] if ref.startswith(_REF_PREFIX) else ref


def convert_schema(schema: Any, refs: set[str] | None = None) -> Any:
    """One JSON-Schema node (kubernetes-validate form) → OpenAPI 3.0 form.

    Names of referenced definitions are added to ``refs`` when given. Returns a
    new structure; the input (shared, cached) is never mutated.
    """
    if not isinstance(schema, dict):
        return schema
    out: Schema = {}
    for key, value in schema.items():
        if key == "$ref":
            continue
        if key == "type" and isinstance(value, list):
            kept = [t for t in value if t != "null"]
            if kept:
                out["type"] = kept[0]
        elif key == "properties" and isinstance(value, dict):
            out["properties"] = {
                name: _convert_property(name, prop, refs) for name, prop in value.items()
            }
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = convert_schema(value, refs)
        elif key in ("allOf", "anyOf", "oneOf") and isinstance(value, list):
            out[key] = [convert_schema(v, refs) for v in value]
        else:
            out[key] = value
    if "oneOf" in out:
        _collapse_scalar_one_of(out)
    ref = schema.get("$ref")
    if isinstance(ref, str):
        if refs is not None and ref.startswith(_REF_PREFIX):
            refs.add(ref[len(_REF_PREFIX):])
        target = {"$ref": _convert_ref(ref)}
        if not out:
            return target
        out["allOf"] = [target]
    return out


def _convert_property(name: str, prop: Any, refs: set[str] | None) -> Any:
    converted = convert_schema(prop, refs)
    # kubernetes-validate pins apiVersion/kind with an enum; upstream does not
    # (and the enum of DeleteOptions lists every group, which explain prints).
    if name in ("apiVersion", "kind") and isinstance(converted, dict):
        converted.pop("enum", None)
    return converted


def _collapse_scalar_one_of(out: Schema) -> None:
    """IntOrString / Quantity are ``oneOf`` scalars in JSON Schema; upstream's
    OpenAPI says ``type: string`` (with ``format: int-or-string`` for the former)."""
    types = {t.get("type") for t in out["oneOf"] if isinstance(t, dict)}
    if not types or not types <= {"string", "integer", "number"}:
        return
    del out["oneOf"]
    out["type"] = "string"
    if "integer" in types:
        out["format"] = "int-or-string"


def _permissive_schema(definition: ResourceDefinition) -> Schema:
    if definition.structural_schema is not None:
        return _custom_schema(definition)
    return {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
        "x-kubernetes-group-version-kind": [_gvk(definition.group, definition.version, definition.kind)],
    }


def _custom_schema(definition: ResourceDefinition) -> Schema:
    """A CRD version's openAPIV3Schema as upstream publishes it: apiVersion,
    kind and metadata (ObjectMeta) added at the root, tagged with the GVK."""
    schema = orjson.loads(orjson.dumps(definition.structural_schema))
    props = schema.setdefault("properties", {})
    for field in ("apiVersion", "kind"):
        if field not in props:
            type_meta = upstream.definition(_META + "Status") or {}
            doc = ((type_meta.get("properties") or {}).get(field) or {}).get("description", "")
            props[field] = {"type": "string", "description": doc}
    props["metadata"] = {"allOf": [{"$ref": _COMPONENT_PREFIX + _META + "ObjectMeta"}],
                         "description": "Standard object's metadata. More info: https://git.k8s.io/community/"
                         "contributors/devel/sig-architecture/api-conventions.md#metadata"}
    schema.setdefault("type", "object")
    schema["x-kubernetes-group-version-kind"] = [_gvk(definition.group, definition.version, definition.kind)]
    return schema


def _gvk(group: str, version: str, kind: str) -> dict[str, str]:
    return {"group": group, "kind": kind, "version": version}


def _closure(seeds: list[str]) -> dict[str, Schema]:
    """Converted definitions for ``seeds`` and everything they reference."""
    out: dict[str, Schema] = {}
    pending = list(seeds)
    while pending:
        name = pending.pop()
        if name in out:
            continue
        raw = upstream.definition(name)
        if raw is None:
            continue
        refs: set[str] = set()
        converted = convert_schema(raw, refs)
        if name == _INT_OR_STRING:
            converted = {"description": raw.get("description", ""), "type": "string", "format": "int-or-string"}
        elif name == _QUANTITY:
            converted = {"description": raw.get("description", ""), "type": "string"}
        out[name] = converted
        pending.extend(r for r in refs if r not in out)
    return dict(sorted(out.items()))


def _list_schema(definition: ResourceDefinition, item_name: str) -> tuple[str, Schema | None]:
    """(name, synthetic schema or None if upstream has it) for the list kind."""
    upstream_name = upstream.gvk_definition_name(definition.group, definition.version, definition.list_kind)
    if upstream_name and upstream.definition(item_name) is not None:
        return upstream_name, None
    name = _synthetic_name(definition.group, definition.version, definition.list_kind)
    return name, {
        "description": f"{definition.list_kind} is a list of {definition.kind}",
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"allOf": [{"$ref": _COMPONENT_PREFIX + _META + "ListMeta"}]},
            "items": {"type": "array", "items": {"$ref": _COMPONENT_PREFIX + item_name}},
        },
        "x-kubernetes-group-version-kind": [
            _gvk(definition.group, definition.version, definition.list_kind)
        ],
    }


def build_document(group: str, version: str, definitions: list[ResourceDefinition]) -> Schema:
    """The OpenAPI v3 document of one group-version, as a dict."""
    paths: dict[str, Any] = {}
    seeds: list[str] = list(_COMMON)
    synthetic: dict[str, Schema] = {}
    for d in sorted(definitions, key=lambda d: d.plural):
        item_name = schema_name_for(d)
        has_schema = upstream.definition(item_name) is not None
        if not has_schema:
            synthetic[item_name] = _permissive_schema(d)
            seeds.append(_META + "ObjectMeta")
        else:
            seeds.append(item_name)
        list_name, list_schema = _list_schema(d, item_name)
        if list_schema is None:
            seeds.append(list_name)
        else:
            synthetic[list_name] = list_schema
            seeds.append(_META + "ListMeta")
        if "scale" in d.subresources:
            seeds.append(_SCALE)
        paths.update(
            resource_paths(d, item_name=item_name, list_name=list_name, strategic_merge=has_schema)
        )
    schemas = _closure(seeds)
    schemas.update(synthetic)
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": f"v{upstream.KUBERNETES_VERSION}"},
        "paths": dict(sorted(paths.items())),
        "components": {"schemas": dict(sorted(schemas.items()))},
    }


class OpenAPIService:
    """Serves the root and group-version documents as compact JSON bytes.

    Everything is rebuilt lazily when ``registry.generation`` moves; between
    changes every call is a dict lookup.
    """

    def __init__(self, registry: Registry) -> None:
        self._registry = registry
        self._generation = -1
        self._documents: dict[str, bytes] = {}
        self._hashes: dict[str, str] = {}
        self._root = b""
        self._components: list[dict[str, Schema]] = []
        self._v2: dict[bool, bytes] = {}

    def _refresh(self) -> None:
        if self._generation == self._registry.generation:
            return
        generation = self._registry.generation
        by_gv: dict[tuple[str, str], list[ResourceDefinition]] = {}
        for d in self._registry:
            by_gv.setdefault((d.group, d.version), []).append(d)
        documents: dict[str, bytes] = {}
        hashes: dict[str, str] = {}
        components: list[dict[str, Schema]] = []
        for (group, version), defs in by_gv.items():
            path = gv_path(group, version)
            built = build_document(group, version, defs)
            components.append(built["components"]["schemas"])
            body = orjson.dumps(built)
            documents[path] = body
            hashes[path] = hashlib.sha512(body).hexdigest().upper()
        root = {
            "paths": {
                path: {"serverRelativeURL": f"/openapi/v3/{path}?hash={hashes[path]}"}
                for path in sorted(documents)
            }
        }
        self._documents, self._hashes = documents, hashes
        self._components, self._v2 = components, {}
        self._root = orjson.dumps(root)
        self._generation = generation

    def root(self) -> bytes:
        self._refresh()
        return self._root

    def document(self, path: str) -> bytes | None:
        """The document for ``api/v1`` / ``apis/apps/v1``; None if not served."""
        self._refresh()
        return self._documents.get(path.strip("/"))

    def hash(self, path: str) -> str | None:
        """The ``hash`` query value clients cache the document by."""
        self._refresh()
        return self._hashes.get(path.strip("/"))

    def swagger(self, *, protobuf: bool) -> bytes:
        """The ``/openapi/v2`` document (:mod:`.v2`): gnostic protobuf or
        Swagger JSON. Built on first use, then kept for the generation."""
        self._refresh()
        body = self._v2.get(protobuf)
        if body is None:
            document = swagger_document(self._components)
            body = encode_document(document) if protobuf else orjson.dumps(document)
            self._v2[protobuf] = body
        return body

    @staticmethod
    def patch_content_types() -> tuple[str, ...]:
        return PATCH_CONTENT_TYPES
