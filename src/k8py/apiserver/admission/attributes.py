"""What an admission plugin is told about one request: upstream's ``admission.Attributes``.

One :class:`AdmissionAttributes` is built per admitted request (per object of
a deletecollection) by the handlers and handed to every plugin of the chain,
first to the mutating ones, then to the validating ones.

Invariants:

- ``operation`` is CREATE, UPDATE, DELETE or CONNECT, as upstream names them;
  a PUT or PATCH that creates the object is a CREATE, a POST of a
  subresource (``pods/binding``, ``pods/eviction``) is a CREATE of that
  subresource whose object is the posted Binding or Eviction;
- ``object`` is the object as it will be stored (None for DELETE and for a
  CONNECT without options); a mutating plugin changes it in place or
  replaces it (``attributes.object = new``); ``old_object`` is the object
  as stored before the request (UPDATE and DELETE), never to be changed;
- ``kind`` and ``resource`` are (group, version, name) of what the request is
  about: for a subresource whose body is another kind (``deployments/scale``
  takes an ``autoscaling/v1`` Scale) ``kind`` is that kind;
- ``warnings`` and ``audit_annotations`` are sinks: what plugins add there
  reaches the client (``Warning`` headers) and the audit event.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping, NamedTuple

from k8py.api.errors import Cause, Forbidden
from k8py.apiserver.admission.reinvocation import ReinvocationContext
from k8py.apiserver.authn.user import UNSECURED, UserInfo
from k8py.apiserver.registry import ResourceDefinition

__all__ = ["Operation", "AdmissionAttributes", "GroupVersionKind", "GroupVersionResource"]

Object = dict[str, Any]
Rollback = Callable[[], Awaitable[None]]


class Operation(str, enum.Enum):
    CREATE = "CREATE"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    CONNECT = "CONNECT"


class GroupVersionKind(NamedTuple):
    group: str
    version: str
    kind: str


class GroupVersionResource(NamedTuple):
    group: str
    version: str
    resource: str


@dataclass(slots=True, eq=False)
class AdmissionAttributes:
    operation: Operation
    kind: GroupVersionKind
    resource: GroupVersionResource
    namespace: str = ""
    name: str = ""
    subresource: str = ""
    object: Object | None = None
    old_object: Object | None = None
    user: UserInfo = UNSECURED
    dry_run: bool = False
    #: CreateOptions / UpdateOptions / PatchOptions / DeleteOptions as the API serves them
    options: Mapping[str, Any] = field(default_factory=dict)
    #: the resource's definition (None for a subresource whose kind is not registered)
    definition: ResourceDefinition | None = None
    #: sink: Warning headers for the client
    warnings: list[str] = field(default_factory=list)
    #: sink: annotations for the audit event ("podsecurity.kubernetes.io/enforce-policy": "baseline:latest")
    audit_annotations: dict[str, str] = field(default_factory=dict)
    #: undo actions a validating plugin registered (quota charges), run if the write then fails
    rollbacks: list[Rollback] = field(default_factory=list)
    #: which reinvocable mutators ran and what they left (reinvocationPolicy IfNeeded)
    reinvocation: ReinvocationContext = field(default_factory=ReinvocationContext)

    # -- the sinks ----------------------------------------------------------

    def add_warning(self, message: str) -> None:
        if message and message not in self.warnings:
            self.warnings.append(message)

    def add_audit_annotation(self, key: str, value: str) -> None:
        """As upstream's ``AddAnnotation``: a plugin's key is ``<plugin domain>/<name>``; the first value wins."""
        self.audit_annotations.setdefault(key, value)

    def on_abort(self, rollback: Rollback) -> None:
        """Have ``rollback`` awaited if this write is then not stored (or retried after a conflict)."""
        self.rollbacks.append(rollback)

    # -- what plugins usually ask ------------------------------------------

    def is_core(self, resource: str, subresource: str = "") -> bool:
        """True for a core/v1 ``resource`` (and exactly this ``subresource``)."""
        return self.resource.group == "" and self.resource.resource == resource and self.subresource == subresource

    @property
    def qualified_resource(self) -> str:
        """``pods``, ``deployments.apps``: how Forbidden messages name the resource."""
        group, _, resource = self.resource
        return f"{resource}.{group}" if group else resource

    def forbidden_message(self, reason: str) -> str:
        """Upstream's ``admission.NewForbidden``: ``pods "web" is forbidden: <reason>``."""
        name = self.name
        if not name and isinstance(self.object, dict):
            name = (self.object.get("metadata") or {}).get("name") or ""
        return f'{self.qualified_resource} "{name}" is forbidden: {reason}'

    def forbidden(self, reason: str, causes: tuple[Cause, ...] = ()) -> Forbidden:
        """The 403 a plugin raises to refuse the request (message and details as upstream's)."""
        name = self.name
        if not name and isinstance(self.object, dict):
            name = (self.object.get("metadata") or {}).get("name") or ""
        return Forbidden(self.forbidden_message(reason), name=name, group=self.resource.group,
                         kind=self.resource.resource, causes=causes)
