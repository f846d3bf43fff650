"""The ``paths`` of an OpenAPI v3 group-version document, per resource.

Split from :mod:`k8py.apiserver.openapi.v3` (which assembles documents and
converts schemas) because the operation table is long and self-contained.

What clients rely on, and so what every operation here carries:

* ``x-kubernetes-group-version-kind`` (with ``group`` present even when empty:
  ``kubectl explain`` compares it as a whole map) and ``x-kubernetes-action``;
* every PATCH lists the query parameters ``dryRun``, ``fieldManager``,
  ``fieldValidation`` and ``force`` inline (kubectl's query-param verifier stops
  at the first PATCH operation tagged with the kind, in map order, so all of
  them must list ``fieldValidation``), and a request body in the patch content
  types the kind accepts;
* ``$ref`` targets are ``#/components/schemas/<name>`` and every name used is
  also a seed of the document's schema closure (see ``openapi.build_document``).
"""

from __future__ import annotations

from typing import Any

from k8py.apiserver.registry import ResourceDefinition

__all__ = ["PATCH_CONTENT_TYPES", "resource_paths", "operation_group_name"]

Operation = dict[str, Any]

PATCH_CONTENT_TYPES = (
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
)
_RESPONSE_TYPES = ("application/json", "application/vnd.kubernetes.protobuf", "application/yaml")
_WATCH_TYPES = ("application/json;stream=watch", "application/vnd.kubernetes.protobuf;stream=watch")
_META = "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1."
_SCALE = "#/components/schemas/io.k8s.api.autoscaling.v1.Scale"


def _query(name: str, description: str, type_: str = "string", unique: bool = True) -> dict[str, Any]:
    param: dict[str, Any] = {
        "name": name,
        "in": "query",
        "description": description,
        "schema": {"type": type_, "uniqueItems": True} if unique else {"type": type_},
    }
    return param


_PRETTY = _query("pretty", "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent indicates a browser or command-line HTTP tool (curl and wget).")
_DRY_RUN = _query("dryRun", "When present, indicates that modifications should not be persisted. An invalid or unrecognized dryRun directive will result in an error response and no further processing of the request. Valid values are: - All: all dry run stages will be processed")
_FIELD_MANAGER = _query("fieldManager", "fieldManager is a name associated with the actor or entity that is making these changes. The value must be less than or 128 characters long, and only contain printable characters, as defined by https://golang.org/pkg/unicode/#IsPrint.")
_FIELD_MANAGER_PATCH = _query("fieldManager", "fieldManager is a name associated with the actor or entity that is making these changes. The value must be less than or 128 characters long, and only contain printable characters, as defined by https://golang.org/pkg/unicode/#IsPrint. This field is required for apply requests (application/apply-patch) but optional for non-apply patch types (JsonPatch, MergePatch, StrategicMergePatch).")
_FIELD_VALIDATION = _query("fieldValidation", "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore: This will ignore any unknown fields that are silently dropped from the object, and will ignore all but the last duplicate field that the decoder encounters. This is the default behavior prior to v1.23. - Warn: This will send a warning via the standard warning response header for each unknown field that is dropped from the object, and for each duplicate field that is encountered. The request will still succeed if there are no other errors, and will only persist the last of any duplicate fields. This is the default in v1.23+ - Strict: This will fail the request with a BadRequest error if any unknown fields would be dropped from the object, or if any duplicate fields are present. The error returned from the server will contain all unknown and duplicate fields encountered.")
_FORCE = _query("force", "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people. Force flag must be unset for non-apply patch requests.", "boolean")
_LIST_PARAMS = [
    _query("allowWatchBookmarks", "allowWatchBookmarks requests watch events with type \"BOOKMARK\". Servers that do not implement bookmarks may ignore this flag and bookmarks are sent at the server's discretion.", "boolean"),
    _query("continue", "The continue option should be set when retrieving more results from the server. The value is opaque and returned by the server in metadata.continue."),
    _query("fieldSelector", "A selector to restrict the list of returned objects by their fields. Defaults to everything."),
    _query("labelSelector", "A selector to restrict the list of returned objects by their labels. Defaults to everything."),
    _query("limit", "limit is a maximum number of responses to return for a list call. If more items exist, the server will set the `continue` field on the list metadata to a value that can be used with the same initial query to retrieve the next set of results.", "integer"),
    _query("resourceVersion", "resourceVersion sets a constraint on what resource versions a request may be served from. Defaults to unset"),
    _query("resourceVersionMatch", "resourceVersionMatch determines how resourceVersion is applied to list calls. Defaults to unset"),
    _query("sendInitialEvents", "`sendInitialEvents=true` may be set together with `watch=true`. In that case, the watch stream will begin with synthetic events to produce the current state of objects in the collection.", "boolean"),
    _query("timeoutSeconds", "Timeout for the list/watch call. This limits the duration of the call, regardless of any activity or inactivity.", "integer"),
    _query("watch", "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications. Specify resourceVersion.", "boolean"),
]
_DELETE_PARAMS = [
    _DRY_RUN,
    _query("gracePeriodSeconds", "The duration in seconds before the object should be deleted. Value must be non-negative integer. The value zero indicates delete immediately.", "integer"),
    _query("ignoreStoreReadErrorWithClusterBreakingPotential", "if set to true, it will trigger an unsafe deletion of the resource in case the normal deletion flow fails with a corrupt object error.", "boolean"),
    _query("orphanDependents", "Deprecated: please use the PropagationPolicy, this field will be deprecated in 1.7. Should the dependent objects be orphaned.", "boolean"),
    _query("propagationPolicy", "Whether and how garbage collection will be performed. Either this field or OrphanDependents may be set, but not both. Acceptable values are: 'Orphan', 'Background', 'Foreground'."),
]
_NAMESPACE = {"name": "namespace", "in": "path", "description": "object name and auth scope, such as for teams and projects", "required": True, "schema": {"type": "string", "uniqueItems": True}}


def _name_param(kind: str, suffix: str = "") -> dict[str, Any]:
    return {"name": "name", "in": "path", "description": f"name of the {kind}{suffix}", "required": True, "schema": {"type": "string", "uniqueItems": True}}


def operation_group_name(group: str, version: str) -> str:
    """``CoreV1``, ``AppsV1``, ``RbacAuthorizationV1``, ``ExampleComV1``: the
    middle of upstream operation IDs (``patchAppsV1NamespacedDeployment``)."""
    if not group:
        return "Core" + version.capitalize()
    trimmed = group.removesuffix(".k8s.io")
    parts = [p for chunk in trimmed.split(".") for p in chunk.split("-")]
    return "".join(p[:1].upper() + p[1:] for p in parts) + version.capitalize()


def _tag(group: str, version: str) -> str:
    return f"{(group.removesuffix('.k8s.io') or 'core').replace('.', '_')}_{version}"


def _content(ref: str, types: tuple[str, ...] = _RESPONSE_TYPES) -> dict[str, Any]:
    return {t: {"schema": {"$ref": ref}} for t in types}


def _op(
    d: ResourceDefinition,
    *,
    action: str,
    op_id: str,
    description: str,
    ref: str,
    gvk: dict[str, str],
    params: list[dict[str, Any]],
    codes: tuple[str, ...] = ("200",),
    body: dict[str, Any] | None = None,
) -> Operation:
    op: Operation = {
        "tags": [_tag(d.group, d.version)],
        "description": description,
        "operationId": op_id,
        "parameters": params,
        "responses": {code: {"description": _CODE_TEXT[code], "content": _content(ref)} for code in codes}
        | {"401": {"description": "Unauthorized"}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk,
    }
    if body is not None:
        op["requestBody"] = body
    return op


_CODE_TEXT = {"200": "OK", "201": "Created", "202": "Accepted"}


def _patch_body(types: tuple[str, ...]) -> dict[str, Any]:
    return {"content": _content(_META + "Patch", types), "required": True}


def _object_body(ref: str) -> dict[str, Any]:
    return {"content": {"*/*": {"schema": {"$ref": ref}}}, "required": True}


def resource_paths(
    d: ResourceDefinition, *, item_name: str, list_name: str, strategic_merge: bool = True
) -> dict[str, Any]:
    """Every path of one resource: collection, item, all-namespaces list,
    ``/status`` and ``/scale`` when served. ``strategic_merge=False`` (kinds
    without an upstream schema, like custom resources) leaves
    ``application/strategic-merge-patch+json`` out of the PATCH bodies."""
    item_ref = "#/components/schemas/" + item_name
    list_ref = "#/components/schemas/" + list_name
    gvk = {"group": d.group, "kind": d.kind, "version": d.version}
    mid = operation_group_name(d.group, d.version)
    scope = "Namespaced" if d.namespaced else ""
    prefix = f"/apis/{d.group}/{d.version}" if d.group else f"/api/{d.version}"
    ns = "/namespaces/{namespace}" if d.namespaced else ""
    scope_params = [_NAMESPACE] if d.namespaced else []
    verbs = set(d.verbs)
    patch_types = PATCH_CONTENT_TYPES if strategic_merge else PATCH_CONTENT_TYPES[:3]
    write_params = [_DRY_RUN, _FIELD_MANAGER, _FIELD_VALIDATION]
    patch_params = [_DRY_RUN, _FIELD_MANAGER_PATCH, _FIELD_VALIDATION, _FORCE]

    def ops_for(target_gvk: dict[str, str], ref: str, sub: str, sub_word: str) -> dict[str, Any]:
        ops: dict[str, Any] = {"parameters": [_name_param(d.kind, f" {sub_word}" if sub_word else ""), *scope_params, _PRETTY]}
        what = f"{sub_word} of the specified {d.kind}" if sub_word else f"the specified {d.kind}"
        if "get" in verbs:
            ops["get"] = _op(d, action="get", op_id=f"read{mid}{scope}{d.kind}{sub}", description=f"read {what}", ref=ref, gvk=target_gvk, params=[])
        if "update" in verbs:
            ops["put"] = _op(d, action="put", op_id=f"replace{mid}{scope}{d.kind}{sub}", description=f"replace {what}", ref=ref, gvk=target_gvk, params=list(write_params), codes=("200", "201"), body=_object_body(ref))
        if "patch" in verbs:
            ops["patch"] = _op(d, action="patch", op_id=f"patch{mid}{scope}{d.kind}{sub}", description=f"partially update {what}", ref=ref, gvk=target_gvk, params=list(patch_params), codes=("200", "201"), body=_patch_body(patch_types))
        return ops

    paths: dict[str, Any] = {}
    collection: dict[str, Any] = {"parameters": [*scope_params, _PRETTY]}
    if "list" in verbs:
        collection["get"] = _op(d, action="list", op_id=f"list{mid}{scope}{d.kind}", description=f"list or watch objects of kind {d.kind}", ref=list_ref, gvk=gvk, params=list(_LIST_PARAMS))
        collection["get"]["responses"]["200"]["content"].update(_content(list_ref, _WATCH_TYPES))
    if "create" in verbs:
        collection["post"] = _op(d, action="post", op_id=f"create{mid}{scope}{d.kind}", description=f"create a {d.kind}", ref=item_ref, gvk=gvk, params=list(write_params), codes=("200", "201", "202"), body=_object_body(item_ref))
    if "deletecollection" in verbs:
        collection["delete"] = _op(d, action="deletecollection", op_id=f"deletecollection{mid}{scope}{d.kind}", description=f"delete collection of {d.kind}", ref=_META + "Status", gvk=gvk, params=[*_DELETE_PARAMS, *_LIST_PARAMS[1:-1]], body={"content": {"*/*": {"schema": {"$ref": _META + "DeleteOptions"}}}})
    paths[f"{prefix}{ns}/{d.plural}"] = collection

    item = ops_for(gvk, item_ref, "", "")
    if "delete" in verbs:
        item["delete"] = _op(d, action="delete", op_id=f"delete{mid}{scope}{d.kind}", description=f"delete a {d.kind}", ref=item_ref if d.strategy.return_deleted_object else _META + "Status", gvk=gvk, params=list(_DELETE_PARAMS), codes=("200", "202"), body={"content": {"*/*": {"schema": {"$ref": _META + "DeleteOptions"}}}})
    paths[f"{prefix}{ns}/{d.plural}/{{name}}"] = item

    if d.namespaced and "list" in verbs:
        all_ns: dict[str, Any] = {"parameters": [_PRETTY], "get": _op(d, action="list", op_id=f"list{mid}{d.kind}ForAllNamespaces", description=f"list or watch objects of kind {d.kind}", ref=list_ref, gvk=gvk, params=list(_LIST_PARAMS))}
        all_ns["get"]["responses"]["200"]["content"].update(_content(list_ref, _WATCH_TYPES))
        paths[f"{prefix}/{d.plural}"] = all_ns

    if "status" in d.subresources:
        paths[f"{prefix}{ns}/{d.plural}/{{name}}/status"] = ops_for(gvk, item_ref, "Status", "status")
    if "scale" in d.subresources:
        scale_gvk = {"group": "autoscaling", "kind": "Scale", "version": "v1"}
        paths[f"{prefix}{ns}/{d.plural}/{{name}}/scale"] = ops_for(scale_gvk, _SCALE, "Scale", "scale")
    return paths
