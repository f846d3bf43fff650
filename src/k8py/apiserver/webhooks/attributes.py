"""What a webhook or a policy is told about a request: the narrow view of the
admission chain's attributes the dispatchers read.

:class:`RequestAttributes` is the subset of the chain's ``AdmissionAttributes``
the webhook and policy dispatchers use (client-go style: the consumer
declares the interface it needs). Kinds and resources are
(group, version, name) tuples — the chain's ``GroupVersionKind`` /
``GroupVersionResource`` named tuples, re-exported here — and :func:`gvk_api` /
:func:`gvr_api` write them as AdmissionReview and CEL's ``request`` do.
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol

from k8py.apiserver.admission.attributes import GroupVersionKind, GroupVersionResource
from k8py.apiserver.authn.user import UserInfo

__all__ = ["GroupVersionKind", "GroupVersionResource", "RequestAttributes", "gvk_api", "gvr_api", "operation_name"]

Object = dict[str, Any]


def operation_name(operation: Any) -> str:
    """``CREATE`` as a plain str (the chain's Operation is a str enum, which CEL does not take)."""
    return str(getattr(operation, "value", operation))


def gvk_api(gvk: tuple[str, str, str]) -> dict[str, str]:
    return {"group": gvk[0], "version": gvk[1], "kind": gvk[2]}


def gvr_api(gvr: tuple[str, str, str]) -> dict[str, str]:
    return {"group": gvr[0], "version": gvr[1], "resource": gvr[2]}


class RequestAttributes(Protocol):
    """One admission request. ``object`` is what would be stored (mutating
    dispatchers replace it), ``old_object`` the stored one (update, delete)."""

    operation: str  # CREATE / UPDATE / DELETE / CONNECT (a str enum in the chain)
    kind: Any  # (group, version, kind)
    resource: Any  # (group, version, resource)
    subresource: str
    name: str
    namespace: str
    object: Object | None
    old_object: Object | None
    user: UserInfo
    dry_run: bool
    #: CreateOptions / UpdateOptions / DeleteOptions as the client sent them (apiVersion meta.k8s.io/v1)
    options: Mapping[str, Any] | None

    def add_warning(self, text: str) -> None: ...

    def add_audit_annotation(self, key: str, value: str) -> None: ...
