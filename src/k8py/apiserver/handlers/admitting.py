"""From a resource request to its admission: the attributes the chain is given.

:func:`request_admission` resolves what upstream's handlers put in
``admission.NewAttributesRecord``: the operation, kind and resource (the
request's, or a subresource's own kind: ``autoscaling/v1`` Scale,
``v1`` Binding, ``policy/v1`` Eviction, the ``*Options`` of a CONNECT), the
user from ``request[USER_KEY]`` (:data:`~k8py.apiserver.authn.user.UNSECURED`
when nothing authenticated the request: the insecure port), dry run, and the
request's options in their API shape. It returns None when no enabled plugin
handles the operation, so an empty chain costs a request nothing.
"""

from __future__ import annotations

from typing import Any, Mapping

from k8py.apiserver.admission.attributes import AdmissionAttributes, GroupVersionKind, GroupVersionResource, Operation
from k8py.apiserver.admission.chain import AdmissionChain
from k8py.apiserver.admission.request import RequestAdmission
from k8py.apiserver.audit.auditor import ANNOTATIONS_KEY
from k8py.apiserver.authn.user import UNSECURED, USER_KEY
from k8py.apiserver.handlers.context import RequestContext
from k8py.apiserver.registry import ResourceDefinition

__all__ = ["request_admission", "Operation", "OPTIONS_KINDS", "SUBRESOURCE_KINDS"]

#: the operation's options kind (meta.k8s.io/v1)
OPTIONS_KINDS = {Operation.CREATE: "CreateOptions", Operation.UPDATE: "UpdateOptions", Operation.DELETE: "DeleteOptions"}

#: subresources whose body is a kind of its own: (group, version, kind)
SUBRESOURCE_KINDS: dict[str, GroupVersionKind] = {
    "scale": GroupVersionKind("autoscaling", "v1", "Scale"),
    "binding": GroupVersionKind("", "v1", "Binding"),
    "eviction": GroupVersionKind("policy", "v1", "Eviction"),
    "exec": GroupVersionKind("", "v1", "PodExecOptions"),
    "attach": GroupVersionKind("", "v1", "PodAttachOptions"),
    "portforward": GroupVersionKind("", "v1", "PodPortForwardOptions"),
}
_PROXY_KINDS = {"pods": "PodProxyOptions", "nodes": "NodeProxyOptions", "services": "ServiceProxyOptions"}


#: id(definition) -> (the definition, its kind, its resource): built once per definition (the
#: definition is held, so its id is not reused while the entry lives)
_NAMES: dict[int, tuple[ResourceDefinition, GroupVersionKind, GroupVersionResource]] = {}


def _names_of(d: ResourceDefinition) -> tuple[GroupVersionKind, GroupVersionResource]:
    hit = _NAMES.get(id(d))
    if hit is None or hit[0] is not d:
        if len(_NAMES) >= 4096:  # custom resources come and go
            _NAMES.clear()
        hit = _NAMES[id(d)] = (d, GroupVersionKind(d.group, d.version, d.kind), GroupVersionResource(d.group, d.version, d.plural))
    return hit[1], hit[2]


def _options(operation: Operation, ctx: RequestContext, dry_run: bool, extra: Mapping[str, Any] | None) -> dict[str, Any]:
    kind = OPTIONS_KINDS.get(operation)
    if kind is None:
        return dict(extra or {})
    out: dict[str, Any] = {"kind": kind, "apiVersion": "meta.k8s.io/v1"}
    if dry_run:
        out["dryRun"] = ["All"]
    if operation is not Operation.DELETE:
        manager = ctx.params.get("fieldManager")
        if manager:
            out["fieldManager"] = manager
        validation = ctx.params.get("fieldValidation")
        if validation:
            out["fieldValidation"] = validation
    if extra:
        out.update(extra)
    return out


def request_admission(
    chain: AdmissionChain | None,
    ctx: RequestContext,
    operation: Operation,
    *,
    definition: ResourceDefinition | None = None,
    subresource: str | None = None,
    namespace: str | None = None,
    name: str | None = None,
    dry_run: bool | None = None,
    options: Mapping[str, Any] | None = None,
) -> RequestAdmission | None:
    """The admission of this request (None if no plugin handles ``operation``).

    ``definition`` defaults to the request's; ``subresource`` to the path's
    (its first segment: ``proxy`` of ``nodes/N/proxy/x``)."""
    if chain is None or not chain.handles(operation):
        return None
    d = definition or ctx.definition
    sub = ctx.path.subresource.split("/", 1)[0] if subresource is None else subresource
    own_kind, resource = _names_of(d)
    if sub == "proxy":
        kind = GroupVersionKind("", "v1", _PROXY_KINDS.get(d.plural, "PodProxyOptions"))
    else:
        kind = SUBRESOURCE_KINDS.get(sub) or own_kind
    dry = ctx.dry_run if dry_run is None else dry_run
    attributes = AdmissionAttributes(
        operation=operation,
        kind=kind,
        resource=resource,
        namespace=ctx.namespace if namespace is None else namespace,
        name=ctx.path.name if name is None else name,
        subresource=sub,
        user=ctx.request.get(USER_KEY, UNSECURED),
        dry_run=dry,
        options=_options(operation, ctx, dry, options),
        definition=d,
    )
    annotations = ctx.request.get(ANNOTATIONS_KEY)
    if annotations is not None:  # audited: what plugins annotate reaches the audit event
        attributes.audit_annotations = annotations
    return RequestAdmission(chain, attributes)
