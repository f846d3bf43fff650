"""The resources a CustomResourceDefinition serves.

Each served version of a CRD becomes a
:class:`~k8py.apiserver.registry.ResourceDefinition` on exactly the path
built-in kinds take. Custom objects are stored under
``/registry/<group>/<plural>/...`` (upstream's etcd layout), one key whatever
version they were written in.

Invariants: a definition built here has ``custom=True`` (so strategic merge
patch is refused with 415, as upstream does for custom resources) and its
strategy tracks ``metadata.generation`` (upstream always does for CRs).
"""

from __future__ import annotations

from typing import Any

from k8py.api.errors import Cause, MethodNotAllowed
from k8py.apiserver.crd.conversion import WebhookConverter
from k8py.apiserver.crd.printer import printer_for_version
from k8py.apiserver.validation import structural
from k8py.apiserver.validation.cel_rules import build_rule_tree
from k8py.apiserver.resources.strategies import path_getter
from k8py.apiserver.registry import ResourceDefinition, ScaleSpec, Strategy
from k8py.apiserver.webhooks.client import WebhookClient

__all__ = ["CustomResourceStrategy", "definitions_for"]

Object = dict[str, Any]


class CustomResourceStrategy(Strategy):
    tracks_generation = True

    def __init__(self, *, crd_name: str, has_status: bool, schema: Object | None = None,
                 terminating: bool = False) -> None:
        self.crd_name = crd_name
        self.has_status = has_status
        self.schema = schema
        self.terminating = terminating
        #: the schema's x-kubernetes-validations, compiled (None: it has none)
        self.rules = build_rule_tree(schema) if schema is not None else None

    def default(self, obj: Object) -> None:
        """Fill the schema's defaults (upstream: on decoding every write).
        Unknown fields are already pruned (or refused) by fieldValidation
        when the request body is decoded, for every write path."""
        if self.schema is not None:
            structural.apply_defaults(obj, self.schema)

    def prepare_for_status_update(self, obj: Object, old: Object) -> None:
        super().prepare_for_status_update(obj, old)
        self.default(obj)

    def prepare_for_create(self, obj: Object) -> None:
        if self.terminating:
            raise MethodNotAllowed(
                f"create not allowed while custom resource definition {self.crd_name} is terminating")
        super().prepare_for_create(obj)

    def validate(self, obj: Object) -> list[Cause]:
        return self._validate(obj, None)

    def validate_update(self, obj: Object, old: Object) -> list[Cause]:
        return self._validate(obj, old)

    def _validate(self, obj: Object, old: Object | None) -> list[Cause]:
        """Schema validation, then the CEL rules (with ``oldSelf`` on update)
        unless a value has the wrong type, as upstream's ``hasBlockingErr``."""
        if self.schema is None:
            return []
        causes = structural.validate(obj, self.schema)
        if self.rules is None:
            return causes
        if any(c.reason == "FieldValueTypeInvalid" for c in causes):
            return causes + [Cause("FieldValueInvalid", "Invalid value: \"null\": some validation rules were not "
                                   "checked because the object was invalid; correct the existing errors to "
                                   "complete validation", "<nil>")]
        return causes + self.rules.validate(obj, old)


class VersionConverter:
    """Conversion ``None`` between a served version and the storage version:
    only ``apiVersion`` changes (upstream's nopConverter); and, when the
    schema has defaults, they are filled on the way out too, as upstream
    defaults what it reads from storage (a default added later shows).
    Not used for the storage version itself (see ``_converter``)."""

    field_aliases: dict[str, str] = {}
    #: the storage version's own definition (objects of older versions are
    #: read through it): its watch cache holds the stored form
    reads_stored_form = False

    def __init__(self, served: str, stored: str, schema: Object | None = None) -> None:
        self.served = served
        self.stored = stored
        self.schema = schema

    def to_storage(self, obj: Object) -> Object:
        return {**obj, "apiVersion": self.stored} if "apiVersion" in obj else obj

    def from_storage(self, obj: Object) -> Object:
        out = {**obj, "apiVersion": self.served} if "apiVersion" in obj else obj
        if self.schema is not None:
            structural.apply_defaults(out, self.schema)
        return out


def _has_defaults(schema: Any) -> bool:
    if isinstance(schema, dict):
        return "default" in schema or any(_has_defaults(v) for v in schema.values())
    if isinstance(schema, list):
        return any(_has_defaults(v) for v in schema)
    return False


def _older_versions_stored(crd: Object, stored: str) -> bool:
    """``status.storedVersions`` names a version besides the storage version:
    objects written before the storage version changed may still be in it."""
    return any(v != stored for v in (crd.get("status") or {}).get("storedVersions") or [])


def _converter(crd: Object, served: str, stored: str, schema: Object | None) -> VersionConverter | None:
    """None for the storage version: its stored bytes are served as they are
    (the list fast path; defaulting every item on read made a list of 2,000
    cost 4.7x a ConfigMap list) - unless objects of an older storage version
    may remain, which are then given the storage version's apiVersion on
    read. Other served versions decode each object anyway, so they fill
    defaults on read as well."""
    group = crd["spec"]["group"]
    if served == stored and not _older_versions_stored(crd, stored):
        return None
    with_defaults = schema if schema is not None and _has_defaults(schema) else None
    converter = VersionConverter(f"{group}/{served}", f"{group}/{stored}", with_defaults)
    converter.reads_stored_form = served == stored
    return converter


def _webhook_converter(crd: Object, served: str, stored: str, schema: Object | None,
                       client: WebhookClient | None) -> WebhookConverter | None:
    """The webhook between ``served`` and the storage version; for the
    storage version itself only while older versions may be stored (the
    webhook then converts just the objects still in them)."""
    conversion = crd["spec"].get("conversion") or {}
    if client is None or conversion.get("strategy") != "Webhook":
        return None
    if served == stored and not _older_versions_stored(crd, stored):
        return None
    return WebhookConverter(client, conversion.get("webhook") or {}, group=crd["spec"]["group"],
                            kind=crd["spec"]["names"]["kind"], served=served, stored=stored, schema=schema)


def _field_getters(version: Object) -> dict[str, Any]:
    """``selectableFields``: ``spec.color`` for ``jsonPath: .spec.color``."""
    getters = {}
    for field in version.get("selectableFields") or []:
        steps = _path(str(field.get("jsonPath") or ""))
        if steps:
            getters[".".join(steps)] = path_getter(*steps)
    return getters


def _path(json_path: str) -> tuple[str, ...]:
    """``.spec.replicas`` -> ("spec", "replicas")."""
    return tuple(p for p in json_path.split(".") if p)


def definitions_for(crd: Object, conversion_client: WebhookClient | None = None) -> list[ResourceDefinition]:
    """One definition per served version of ``crd`` (already defaulted);
    ``conversion_client`` calls the conversion webhook of a CRD whose
    strategy is ``Webhook`` (without it, such versions convert as ``None``)."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = spec["group"]
    plural = names["plural"]
    terminating = bool((crd.get("metadata") or {}).get("deletionTimestamp"))
    out = []
    storage_version = next((v["name"] for v in spec.get("versions") or [] if v.get("storage")), "")
    # the storage version first: the watch cache takes its definition from it
    versions = sorted(spec.get("versions") or [], key=lambda v: not v.get("storage"))
    for version in versions:
        if not version.get("served"):
            continue
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        schema = schema if isinstance(schema, dict) else None
        subresources = version.get("subresources") or {}
        served_sub = {s for s in ("status", "scale") if isinstance(subresources.get(s), dict)}
        scale = None
        if "scale" in served_sub:
            raw = subresources["scale"]
            scale = ScaleSpec(
                replicas_path=_path(raw.get("specReplicasPath") or ".spec.replicas"),
                status_replicas_path=_path(raw.get("statusReplicasPath") or ".status.replicas"),
                selector_path=_path(raw.get("labelSelectorPath") or "") or ("status", "selector"),
            )
        out.append(ResourceDefinition(
            group=group,
            version=version["name"],
            kind=names["kind"],
            plural=plural,
            singular=names.get("singular") or names["kind"].lower(),
            namespaced=spec.get("scope") == "Namespaced",
            short_names=tuple(names.get("shortNames") or ()),
            categories=tuple(names.get("categories") or ()),
            subresources=frozenset(served_sub),
            strategy=CustomResourceStrategy(
                crd_name=crd["metadata"]["name"], has_status="status" in served_sub, schema=schema,
                terminating=terminating),
            storage_resource=f"{group}/{plural}",
            scale=scale,
            custom=True,
            field_getters=_field_getters(version),
            converter=_webhook_converter(crd, version["name"], storage_version, schema, conversion_client)
            or _converter(crd, version["name"], storage_version, schema),
            printer=printer_for_version(version),
            structural_schema=schema,
        ))
    return out
