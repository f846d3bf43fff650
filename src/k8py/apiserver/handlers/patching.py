"""PATCH: the four patch types applied through the generic update path.

The patch engines themselves are pure functions in :mod:`k8py.api.patch`;
this module applies one to the stored object inside
``ObjectStore.guaranteed_update`` (so a conflicting concurrent write makes the
patch re-apply to the newer object, as upstream), honours a
``metadata.resourceVersion`` in the patch as a precondition, and creates the
object when a server-side apply targets a name that does not exist yet.
"""

from __future__ import annotations

from typing import Any, Mapping

from k8py.api.errors import BadRequest, NotFound
from k8py.api.patch import apply_patch, decode_apply_body, server_side_apply
from k8py.apiserver.handlers.codec import APPLY_PATCH
from k8py.apiserver.store.object_meta import rfc3339
from k8py.apiserver.store.admission_hook import AdmissionHook
from k8py.apiserver.store.field_managers import FieldManager
from k8py.apiserver.admission.field_validation import check_field_validation
from k8py.apiserver.store.object_store import ObjectStore
from k8py.apiserver.registry import ResourceDefinition
from k8py.apiserver.admission.time_fields import needs_normalizing, normalize_times
from k8py.apiserver.handlers.request_info import query_bool

__all__ = ["patch_object"]

Object = dict[str, Any]


async def patch_object(
    store: ObjectStore,
    definition: ResourceDefinition,
    namespace: str,
    name: str,
    content_type: str,
    raw: bytes,
    *,
    params: Mapping[str, str],
    subresource: str = "",
    dry_run: bool = False,
    manager: FieldManager | None = None,
    admission: AdmissionHook | None = None,
) -> tuple[Object, bool, list[str]]:
    """Returns (object, created, warnings). ``admission`` admits the patched
    object as an UPDATE (inside the guaranteed update), or as a CREATE when an
    apply creates the object."""
    schema = definition.schema_name
    validation = params.get("fieldValidation", "")
    warnings: list[str] = []

    if content_type == APPLY_PATCH:
        applied = decode_apply_body(raw)
        if needs_normalizing(raw):
            normalize_times(schema, applied)
        _check_apply_identity(definition, namespace, name, applied)
        warnings = check_field_validation(validation, schema, applied, None, verb="patch",
                                        structural=definition.structural_schema)
        manager = params.get("fieldManager", "")
        force = query_bool(params.get("force", ""))

        ignored = (("f:status",),) if definition.strategy.has_status and not subresource else ()

        def apply(current: Object) -> Object:
            return server_side_apply(
                current, applied, manager=manager, force=force, schema_name=schema, now=rfc3339(),
                subresource=subresource, ignored=ignored,
            )

        try:
            obj = await store.guaranteed_update(
                definition, namespace, name, apply, subresource=subresource, dry_run=dry_run, admission=admission
            )
            return obj, False, warnings
        except NotFound:
            if subresource:
                raise
            new = server_side_apply(
                None, applied, manager=manager, force=force, schema_name=schema, now=rfc3339(), ignored=ignored
            )
            new.setdefault("metadata", {})["name"] = name
            created = await store.create(definition, namespace, new, dry_run=dry_run,
                                         admission=None if admission is None else admission.for_create())
            return created, True, warnings

    def mutate(current: Object) -> Object:
        # ``current`` is this attempt's own decoded copy (fresh_copy): merged in place
        patched = apply_patch(content_type, current, raw, schema_name=schema, owned=True)
        if not isinstance(patched, dict):
            raise BadRequest("the patched object is not a JSON object")
        if needs_normalizing(raw):
            normalize_times(schema, patched)
        warnings[:] = check_field_validation(validation, schema, patched, None, verb="patch",
                                        structural=definition.structural_schema)
        return patched

    obj = await store.guaranteed_update(
        definition, namespace, name, mutate, subresource=subresource, dry_run=dry_run, manager=manager,
        admission=admission,
    )
    return obj, False, warnings


def _check_apply_identity(definition: ResourceDefinition, namespace: str, name: str, applied: Object) -> None:
    """An apply body must name the same object as the URL (upstream's
    versionCheckManager, then checkName)."""
    meta = applied.get("metadata") or {}
    kind = str(applied.get("kind") or "")
    api_version = str(applied.get("apiVersion") or "")
    if kind != definition.kind or api_version != definition.api_version:
        raise BadRequest(f"invalid object type: {_go_gvk(api_version, kind)}")
    if meta.get("name") and meta["name"] != name:
        raise BadRequest(f"the name of the object ({meta['name']}) does not match the name on the URL ({name})")
    if definition.namespaced and meta.get("namespace") and meta["namespace"] != namespace:
        raise BadRequest("the namespace of the provided object does not match the namespace sent on the request")


def _go_gvk(api_version: str, kind: str) -> str:
    """Go's ``schema.GroupVersionKind.String()`` of an object's apiVersion and kind
    (an unparsable apiVersion, with more than one ``/``, counts as empty)."""
    parts = api_version.split("/") if api_version else []
    group, version = ("", parts[0]) if len(parts) == 1 else (parts[0], parts[1]) if len(parts) == 2 else ("", "")
    return f"{group}/{version}, Kind={kind}"
