"""What one resource request is about, and the seams between the handlers.

:class:`RequestContext` is resolved once per request by
``verbs.ResourceHandlers.resolve`` and handed to every handler. The two
protocols here let the generic handlers and their plug-ins meet without
importing each other:

- :class:`SubresourceHost`: what a subresource handler (``subresources``) may
  use of the generic handlers: the object store, the registry, and the
  generic update and patch paths (``/status`` goes through them);
- :class:`DeleteHooks`: what a kind's lifecycle (``admission.namespace_lifecycle``
  for namespaces) is told about a DELETE of one of its objects; the server
  registers one per resource, so the generic delete names no kind.

Import direction: ``verbs`` -> ``subresources`` -> ``context``; nothing here
imports another handler module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Protocol

from aiohttp import web

from k8py.api.errors import BadRequest, NotFound
from k8py.apiserver.admission.attributes import Operation
from k8py.apiserver.admission.request import RequestAdmission
from k8py.apiserver.handlers.codec import ResponseFormat
from k8py.apiserver.handlers.request_info import ResourcePath
from k8py.apiserver.registry import Registry, ResourceDefinition
from k8py.apiserver.store.field_managers import FieldManager, field_manager_for
from k8py.apiserver.store.object_store import ObjectStore
from k8py.apiserver.watch.cacher import Cacher

__all__ = ["RequestContext", "SubresourceHost", "DeleteHooks", "not_found"]


def not_found() -> NotFound:
    return NotFound("the server could not find the requested resource")


@dataclass(slots=True)
class RequestContext:
    """What one request is about, resolved once."""

    request: web.Request
    path: ResourcePath
    definition: ResourceDefinition
    params: Mapping[str, str]
    fmt: ResponseFormat

    @property
    def namespace(self) -> str:
        return self.path.namespace

    @property
    def manager(self) -> FieldManager:
        return field_manager_for(self.params, self.request.headers.get("User-Agent"))

    @property
    def dry_run(self) -> bool:
        values = self.request.query.getall("dryRun", [])
        for v in values:
            if v != "All":
                raise BadRequest(f'Invalid dry run value: "{v}": supported values: "All"')
        return bool(values)


class SubresourceHost(Protocol):
    """The generic handlers, as a subresource handler sees them."""

    @property
    def registry(self) -> Registry: ...

    @property
    def store(self) -> ObjectStore: ...

    @property
    def cacher(self) -> Cacher: ...

    async def update(self, ctx: RequestContext, *, subresource: str = "") -> web.StreamResponse:
        """The generic PUT, limited to ``subresource``'s fields."""

    def admission_for(self, ctx: RequestContext, operation: Operation, **kw: Any) -> RequestAdmission | None:
        """The request's admission (a ``RequestAdmission``), or None when no plugin handles ``operation``."""

    async def patch(self, ctx: RequestContext, *, subresource: str = "") -> web.StreamResponse:
        """The generic PATCH, limited to ``subresource``'s fields."""


class DeleteHooks(Protocol):
    """A kind's say in the DELETE of one of its objects."""

    def admit_delete(self, name: str) -> None:
        """Raise a StatusError to refuse deleting ``name``."""

    def after_delete(self, name: str) -> None:
        """``name`` was deleted or is now being deleted (not called for a dry run)."""
