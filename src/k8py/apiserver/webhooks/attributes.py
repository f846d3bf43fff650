"""What a webhook or a policy is told about a request: the narrow view of the
admission chain's attributes the dispatchers read.

:class:`RequestAttributes` is the subset of the chain's ``AdmissionAttributes``
the webhook and policy dispatchers use (client-go style: the consumer
declares the interface it needs). ``GroupVersionKind`` and
``GroupVersionResource`` are the shapes AdmissionReview and CEL's
``request`` variable print.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from k8py.apiserver.authn.user import UserInfo

__all__ = ["GroupVersionKind", "GroupVersionResource", "RequestAttributes"]

Object = dict[str, Any]


@dataclass(frozen=True, slots=True)
class GroupVersionKind:
    group: str
    version: str
    kind: str

    def to_api(self) -> dict[str, str]:
        return {"group": self.group, "version": self.version, "kind": self.kind}


@dataclass(frozen=True, slots=True)
class GroupVersionResource:
    group: str
    version: str
    resource: str

    def to_api(self) -> dict[str, str]:
        return {"group": self.group, "version": self.version, "resource": self.resource}


class RequestAttributes(Protocol):
    """One admission request. ``object`` is what would be stored (mutating
    dispatchers replace it), ``old_object`` the stored one (update, delete)."""

    operation: str  # CREATE / UPDATE / DELETE / CONNECT
    kind: GroupVersionKind
    resource: GroupVersionResource
    subresource: str
    name: str
    namespace: str
    object: Object | None
    old_object: Object | None
    user: UserInfo
    dry_run: bool
    #: CreateOptions / UpdateOptions / DeleteOptions as the client sent them (apiVersion meta.k8s.io/v1)
    options: Object | None

    @property
    def namespaced(self) -> bool: ...

    def add_warning(self, text: str) -> None: ...

    def add_audit_annotation(self, key: str, value: str) -> None: ...
