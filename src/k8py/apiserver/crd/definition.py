"""The ``customresourcedefinitions`` resource of ``apiextensions.k8s.io/v1``.

Upstream's apiextensions-apiserver is the spec: the object's name is
``<plural>.<group>``, exactly one served version is the storage version, the
scope is Namespaced or Cluster. A DELETE does not remove a CRD at once: it
gains the ``customresourcecleanup.apiextensions.k8s.io`` finalizer and a
``Terminating`` condition, and the registrar removes the finalizer once every
custom object is gone.

Invariants: the stored CRD is always defaulted (singular, listKind,
conversion strategy), so the registrar never has to guess names.
"""

from __future__ import annotations

import re
from typing import Any

from k8py.api.errors import Cause
from k8py.apiserver.registry import ResourceDefinition, Strategy
from k8py.apiserver.validation.cel_compile import crd_causes
from k8py.apiserver.resources.admissionregistration import _validate_client_config as validate_client_config
from k8py.apiserver.validation.field import forbidden, invalid, not_supported, required

__all__ = ["CRD_DEFINITION", "CLEANUP_FINALIZER", "CRDStrategy", "GROUP"]

GROUP = "apiextensions.k8s.io"
CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"

Object = dict[str, Any]

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_KIND = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")


def _default_names(names: Object) -> None:
    kind = names.get("kind")
    if isinstance(kind, str) and kind:
        names.setdefault("singular", kind.lower())
        names.setdefault("listKind", f"{kind}List")


class CRDStrategy(Strategy):
    has_status = True
    tracks_generation = True

    def default(self, obj: Object) -> None:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return
        if isinstance(spec.get("names"), dict):
            _default_names(spec["names"])
        conversion = spec.setdefault("conversion", {})
        if isinstance(conversion, dict):
            conversion.setdefault("strategy", "None")
        for version in spec.get("versions") or []:
            if isinstance(version, dict) and isinstance(version.get("subresources"), dict):
                scale = version["subresources"].get("scale")
                if isinstance(scale, dict):
                    scale.setdefault("statusReplicasPath", ".status.replicas")

    def initial_status(self, obj: Object) -> Object | None:
        return {"acceptedNames": {"kind": "", "plural": ""}, "conditions": [], "storedVersions": []}

    def begin_termination(self, obj: Object) -> bool:
        """A CRD stays, Terminating, until its objects are deleted (upstream's
        CRD REST Delete adds the cleanup finalizer)."""
        meta = obj.setdefault("metadata", {})
        finalizers = list(meta.get("finalizers") or [])
        if CLEANUP_FINALIZER not in finalizers:
            finalizers.append(CLEANUP_FINALIZER)
        meta["finalizers"] = finalizers
        status = obj.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "Terminating"]
        conditions.append({
            "type": "Terminating", "status": "True", "reason": "InstanceDeletionPending",
            "message": "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
        })
        status["conditions"] = conditions
        return True

    def validate(self, obj: Object) -> list[Cause]:
        return validate_crd(obj, None)

    def validate_update(self, obj: Object, old: Object) -> list[Cause]:
        return validate_crd(obj, old)


def validate_crd(obj: Object, old: Object | None) -> list[Cause]:
    causes: list[Cause] = []
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [required("spec")]
    group = spec.get("group")
    names = spec.get("names") if isinstance(spec.get("names"), dict) else {}
    if not group:
        causes.append(required("spec.group"))
    elif not isinstance(group, str) or not _DNS_SUBDOMAIN.match(group):
        causes.append(invalid("spec.group", group, "a lowercase RFC 1123 subdomain must consist of lower case "
                              "alphanumeric characters, '-' or '.'"))
    elif "." not in group:
        causes.append(invalid("spec.group", group, "should be a domain with at least one dot"))
    plural = names.get("plural")
    kind = names.get("kind")
    if not plural:
        causes.append(required("spec.names.plural"))
    elif not isinstance(plural, str) or not _DNS_LABEL.match(plural):
        causes.append(invalid("spec.names.plural", plural, "a lowercase RFC 1123 label must consist of lower case "
                              "alphanumeric characters or '-', and must start and end with an alphanumeric character"))
    singular = names.get("singular")
    if singular and (not isinstance(singular, str) or not _DNS_LABEL.match(singular)):
        causes.append(invalid("spec.names.singular", singular, "a lowercase RFC 1123 label must consist of lower "
                              "case alphanumeric characters or '-', and must start and end with an alphanumeric character"))
    if not kind:
        causes.append(required("spec.names.kind"))
    elif not isinstance(kind, str) or not _KIND.match(kind):
        causes.append(invalid("spec.names.kind", kind, "may have mixed case, but should otherwise match: "
                              "[a-z]([-a-z0-9]*[a-z0-9])?"))
    for i, short in enumerate(names.get("shortNames") or []):
        if not isinstance(short, str) or not _DNS_LABEL.match(short):
            causes.append(invalid(f"spec.names.shortNames[{i}]", short, "a lowercase RFC 1123 label must consist "
                                  "of lower case alphanumeric characters or '-', and must start and end with an "
                                  "alphanumeric character"))
    name = (obj.get("metadata") or {}).get("name", "")
    if plural and group and name != f"{plural}.{group}":
        causes.append(invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group'))
    scope = spec.get("scope")
    if not scope:
        causes.append(required("spec.scope"))
    elif scope not in ("Cluster", "Namespaced"):
        causes.append(not_supported("spec.scope", scope, ["Cluster", "Namespaced"]))
    causes += _validate_versions(spec.get("versions"))
    causes += _validate_conversion(spec.get("conversion") or {})
    if old is not None:
        old_spec = old.get("spec") or {}
        if old_spec.get("group") != group:
            causes.append(invalid("spec.group", group, "field is immutable"))
        stored = (old.get("status") or {}).get("storedVersions") or []
        if stored and old_spec.get("scope") != scope:
            causes.append(invalid("spec.scope", scope, "field is immutable"))
    return causes


def _validate_versions(versions: Any) -> list[Cause]:
    if not isinstance(versions, list) or not versions:
        return [required("spec.versions", "must have at least one version")]
    causes: list[Cause] = []
    seen: set[str] = set()
    storage = 0
    served = 0
    for i, version in enumerate(versions):
        path = f"spec.versions[{i}]"
        if not isinstance(version, dict):
            causes.append(invalid(path, version, "must be an object"))
            continue
        name = version.get("name")
        if not name:
            causes.append(required(f"{path}.name"))
        elif not isinstance(name, str) or not _DNS_LABEL.match(name):
            causes.append(invalid(f"{path}.name", name, "a DNS-1035 label must consist of lower case alphanumeric "
                                  "characters or '-', start with an alphabetic character, and end with an "
                                  "alphanumeric character"))
        elif name in seen:
            causes.append(invalid("spec.versions", name, "must contain unique version names"))
        else:
            seen.add(name)
        storage += bool(version.get("storage"))
        served += bool(version.get("served"))
        schema = (version.get("schema") or {}).get("openAPIV3Schema") if isinstance(version.get("schema"), dict) else None
        if not isinstance(schema, dict):
            causes.append(required(f"{path}.schema.openAPIV3Schema", "schemas are required"))
        else:
            structural_causes = _structural(schema, f"{path}.schema.openAPIV3Schema", root=True)
            causes += structural_causes
            if not structural_causes:
                causes += crd_causes(schema, f"{path}.schema.openAPIV3Schema")
    if storage != 1:
        causes.append(invalid("spec.versions", versions, "must have exactly one version marked as storage version"))
    if not served:
        causes.append(invalid("spec.versions", versions, "must have at least one version served"))
    return causes


def _validate_conversion(conversion: Object) -> list[Cause]:
    """Upstream's ``validateCustomResourceConversion`` (its paths name the
    internal fields: ``webhookClientConfig``, ``conversionReviewVersions``)."""
    strategy = conversion.get("strategy", "None")
    path = "spec.conversion"
    if strategy not in ("None", "Webhook"):
        return [not_supported(f"{path}.strategy", strategy, ["None", "Webhook"])]
    webhook = conversion.get("webhook") if isinstance(conversion.get("webhook"), dict) else None
    if strategy != "Webhook":
        if webhook is not None and webhook.get("clientConfig") is not None:
            return [forbidden(f"{path}.webhookClientConfig", "should not be set when strategy is not set to Webhook")]
        return []
    causes: list[Cause] = []
    if webhook is None or webhook.get("clientConfig") is None:
        causes.append(required(f"{path}.webhookClientConfig", "required when strategy is set to Webhook"))
    else:
        causes += validate_client_config(webhook["clientConfig"], f"{path}.webhookClientConfig")
    versions = (webhook or {}).get("conversionReviewVersions") or []
    if not versions:
        causes.append(required(f"{path}.conversionReviewVersions", "must include at least one of v1, v1beta1"))
    elif not {"v1", "v1beta1"} & set(versions):
        causes.append(invalid(f"{path}.conversionReviewVersions", versions, "must include at least one of v1, v1beta1"))
    return causes


CRD_DEFINITION = ResourceDefinition(
    group=GROUP,
    version="v1",
    kind="CustomResourceDefinition",
    plural="customresourcedefinitions",
    singular="customresourcedefinition",
    namespaced=False,
    short_names=("crd", "crds"),
    categories=("api-extensions",),
    subresources=frozenset({"status"}),
    strategy=CRDStrategy(),
    storage_resource=f"{GROUP}/customresourcedefinitions",
    openapi_name="io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
)


def _structural(schema: Any, path: str, *, root: bool = False) -> list[Cause]:
    """Upstream's structural-schema rules for types: every node under
    properties/items/additionalProperties names its type (unless it is
    int-or-string or preserves unknown fields); the root is an object."""
    if not isinstance(schema, dict):
        return [invalid(path, schema, "must be an object")]
    causes: list[Cause] = []
    type_ = schema.get("type")
    if root:
        if not type_:
            causes.append(required(f"{path}.type", "must not be empty at the root"))
        elif type_ != "object":
            causes.append(not_supported(f"{path}.type", type_, ["object"]))
    elif not type_ and not schema.get("x-kubernetes-int-or-string") \
            and schema.get("x-kubernetes-preserve-unknown-fields") is not True:
        causes.append(required(f"{path}.type", "must not be empty for specified object fields"))
    if type_ and type_ not in ("object", "array", "string", "integer", "number", "boolean"):
        causes.append(not_supported(f"{path}.type", type_,
                                    ["array", "boolean", "integer", "number", "object", "string"]))
    for name, sub in (schema.get("properties") or {}).items():
        causes += _structural(sub, f"{path}.properties[{name}]")
    if isinstance(schema.get("items"), dict):
        causes += _structural(schema["items"], f"{path}.items")
    if isinstance(schema.get("additionalProperties"), dict):
        causes += _structural(schema["additionalProperties"], f"{path}.additionalProperties")
    return causes
