"""The REST verbs on resources: the generic handlers every kind goes through.

``ResourceHandlers.handle`` maps (HTTP method, path shape) to a verb —
get, list, watch, create, update, patch, delete, deletecollection — and calls
the generic object store, the watch cache, or a subresource handler. Errors
are raised as :mod:`k8py.api.errors` and rendered as ``Status`` by the app's
middleware.

No kind is named here: what differs by kind comes from its definition and
strategy (a collection whose POST another resource's subresource serves:
``Strategy.create_through``) or from the :class:`~k8py.apiserver.handlers.context.DeleteHooks`
the server registers for a resource (namespaces), or the create handlers
(reviews answered without being stored) and create hooks (a new object filled
from the request) it registers by qualified resource name.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Mapping

import orjson
from aiohttp import web

from k8py.api.errors import BadRequest, MethodNotAllowed, NotFound, UnsupportedMediaType
from k8py.apiserver.admission.chain import AdmissionChain
from k8py.apiserver.admission.request import RequestAdmission
from k8py.apiserver.handlers import subresources
from k8py.apiserver.handlers.admitting import Operation, request_admission
from k8py.apiserver.handlers.context import DeleteHooks, RequestContext, not_found
from k8py.apiserver.watch.cacher import Cacher
from k8py.apiserver.watch.watch_cache import CachedObject, build_cached_object
from k8py.apiserver.handlers.codec import APPLY_PATCH, PATCH_TYPES, decode_body, media_type_of, negotiate
from k8py.apiserver.handlers.deletion import delete_object, parse_delete_options
from k8py.apiserver.admission.field_validation import check_field_validation
from k8py.apiserver.handlers.listing import CONSISTENT_READ_TIMEOUT, list_objects
from k8py.apiserver.store.object_store import ObjectStore
from k8py.apiserver.handlers.patching import patch_object
from k8py.apiserver.printers import build_table
from k8py.apiserver.handlers.query import parse_query
from k8py.apiserver.registry import Registry, ResourceDefinition, to_served
from k8py.apiserver.handlers.request_info import ResourcePath, query_bool
from k8py.apiserver.handlers.responses import json_response, list_response, object_response
from k8py.apiserver.admission.time_fields import needs_normalizing, normalize_times
from k8py.apiserver.handlers.watch_stream import serve_watch
from k8py.apiserver.flow import FlowRecorder
from k8py.storage import Storage

#: refused for custom resources (they have no patch strategies)
STRATEGIC_PATCH = "application/strategic-merge-patch+json"

__all__ = ["ResourceHandlers", "RequestContext", "not_found"]

Object = dict[str, Any]


class ResourceHandlers:
    def __init__(
        self,
        *,
        registry: Registry,
        storage: Storage,
        store: ObjectStore,
        cacher: Cacher,
        bookmark_interval: float,
        on_watch: Callable[[str, int], None] | None = None,
        delete_hooks: Mapping[str, DeleteHooks] | None = None,
        flow: FlowRecorder | None = None,
        admission: AdmissionChain | None = None,
        create_handlers: Mapping[str, Callable[[RequestContext], Awaitable[web.StreamResponse]]] | None = None,
        create_hooks: Mapping[str, Callable[[RequestContext, Object], None]] | None = None,
    ) -> None:
        self.registry = registry
        self.storage = storage
        self.store = store
        self.cacher = cacher
        self.bookmark_interval = bookmark_interval
        self.on_watch = on_watch
        #: qualified resource ("namespaces") -> what its lifecycle is told of a DELETE
        self.delete_hooks: Mapping[str, DeleteHooks] = delete_hooks or {}
        #: the list-watch flow recorder (``--trace``), or None
        self.flow = flow
        #: the admission chain writes go through (None: nothing is admitted)
        self.admission = admission

        #: qualified resource -> what answers its POST instead of a store create
        #: (reviews, never stored: ``tokenreviews.authentication.k8s.io``)
        self.create_handlers = dict(create_handlers or {})
        #: qualified resource -> what fills a new object from the request before
        #: it is created (a CSR's requester, from the authenticated user)
        self.create_hooks = dict(create_hooks or {})

    def admission_for(self, ctx: RequestContext, operation: Operation, **kw: Any) -> RequestAdmission | None:
        """This request's admission (see :func:`~k8py.apiserver.handlers.admitting.request_admission`)."""
        return request_admission(self.admission, ctx, operation, **kw)

    def resolve(self, request: web.Request, path: ResourcePath) -> RequestContext:
        definition = self.registry.get(path.group, path.version, path.plural)
        if definition is None or (path.namespace and not definition.namespaced):
            raise not_found()
        params = {k: request.query.getone(k) for k in request.query.keys()}
        fmt = negotiate(request.headers.get("Accept"), include_object=params.get("includeObject", ""))
        return RequestContext(request, path, definition, params, fmt)

    def verb(self, ctx: RequestContext) -> str:
        """The upstream verb name, for metrics and verb checks."""
        method = ctx.request.method
        if not ctx.path.name:
            if method == "GET":
                return "watch" if ctx.path.legacy_watch or query_bool(ctx.params.get("watch", "")) else "list"
            return {"POST": "create", "DELETE": "deletecollection"}.get(method, method.lower())
        return {"GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete", "POST": "create"}.get(
            method, method.lower()
        )

    async def handle(self, ctx: RequestContext) -> web.StreamResponse:
        verb = self.verb(ctx)
        d = ctx.definition
        if ctx.path.subresource:
            return await subresources.handle(self, ctx, verb)
        if verb == "create" and ctx.path.name:
            # POST is served on collections only (and on subresources such as binding)
            raise MethodNotAllowed("the server does not allow this method on the requested resource")
        if verb not in d.verbs:
            raise MethodNotAllowed(f"{ctx.request.method} is not supported on {d.qualified}" if ctx.path.name else "the server does not allow this method on the requested resource")
        if d.namespaced and not ctx.namespace and verb in ("create", "get", "update", "patch", "delete", "deletecollection"):
            raise not_found()
        through = d.strategy.create_through
        if through is not None and verb == "create":
            # e.g. POST bindings: served by pods/binding, the pod named in the body
            plural, subresource = through
            target = self.registry.get(d.group, d.version, plural)
            if target is None or subresource not in target.subresources:
                raise not_found()
            return await subresources.serve(self, ctx, target, subresource, verb)
        if verb == "list":
            return await self.list(ctx)
        if verb == "watch":
            return await self.watch(ctx)
        if verb == "get":
            obj = await self.store.get(d, ctx.namespace, ctx.path.name)
            return object_response(d, obj, ctx.fmt)
        if verb == "create":
            handler = self.create_handlers.get(d.qualified)
            if handler is not None:
                return await handler(ctx)
            return await self.create(ctx)
        if verb == "update":
            return await self.update(ctx)
        if verb == "patch":
            return await self.patch(ctx)
        if verb == "delete":
            return await self.delete(ctx)
        if verb == "deletecollection":
            return await self.delete_collection(ctx)
        raise MethodNotAllowed("the server does not allow this method on the requested resource")

    # -- reads -------------------------------------------------------------

    async def list(self, ctx: RequestContext) -> web.StreamResponse:
        query = parse_query(ctx.definition, ctx.namespace, ctx.params)
        cache = self.cacher.cache_for(ctx.definition)
        page = await list_objects(self.cacher, cache, self.storage, query, ctx.params)
        if ctx.definition.converter is not None:
            served = await to_served(ctx.definition, [orjson.loads(item) for item in page.items])
            page.items = [orjson.dumps(obj) for obj in served]
        return list_response(ctx.definition, page, ctx.fmt)

    async def watch(self, ctx: RequestContext) -> web.StreamResponse:
        query = parse_query(ctx.definition, ctx.namespace, ctx.params)
        cache = self.cacher.cache_for(ctx.definition)
        on_open = None
        if self.on_watch is not None:
            plural = ctx.definition.plural
            on_open = lambda delta: self.on_watch(plural, delta)  # noqa: E731
        return await serve_watch(
            ctx.request,
            definition=ctx.definition,
            cacher=self.cacher,
            cache=cache,
            query=query,
            params=ctx.params,
            fmt=ctx.fmt,
            bookmark_interval=self.bookmark_interval,
            table=build_table,
            on_open=on_open,
            on_sent=None if self.flow is None else self.flow.new_watcher(
                ctx.request.headers.get("User-Agent", ""), ctx.definition.plural, ctx.namespace),
        )

    # -- writes ------------------------------------------------------------

    async def read_object(self, ctx: RequestContext, verb: str) -> tuple[Object, list[str]]:
        raw = await ctx.request.read()
        obj = decode_body(raw, ctx.request.headers.get("Content-Type"))
        if not isinstance(obj, dict):
            raise BadRequest("the body of the request must be a JSON or YAML object")
        if needs_normalizing(raw):
            normalize_times(ctx.definition.schema_name, obj)
        warnings = check_field_validation(
            ctx.params.get("fieldValidation", ""),
            ctx.definition.schema_name,
            obj,
            raw if media_type_of(ctx.request.headers.get("Content-Type")) in ("", "application/json") else None,
            verb=verb,
            kind=ctx.definition.kind,
            version=ctx.definition.version,
            structural=ctx.definition.structural_schema,
        )
        return obj, warnings

    async def create(self, ctx: RequestContext) -> web.StreamResponse:
        obj, warnings = await self.read_object(ctx, "create")
        hook = self.create_hooks.get(ctx.definition.qualified)
        if hook is not None:
            hook(ctx, obj)
        admission = self.admission_for(ctx, Operation.CREATE)
        created = await self.store.create(ctx.definition, ctx.namespace, obj, dry_run=ctx.dry_run, manager=ctx.manager,
                                          admission=admission)
        return object_response(ctx.definition, created, ctx.fmt, status=201, warnings=_with_admission(warnings, admission))

    async def update(self, ctx: RequestContext, *, subresource: str = "") -> web.StreamResponse:
        obj, warnings = await self.read_object(ctx, "update")
        admission = self.admission_for(ctx, Operation.UPDATE, subresource=subresource)
        result, created = await self.store.update(
            ctx.definition,
            ctx.namespace,
            ctx.path.name,
            obj,
            subresource=subresource,
            dry_run=ctx.dry_run,
            manager=ctx.manager,
            admission=admission,
        )
        return object_response(ctx.definition, result, ctx.fmt, status=201 if created else 200,
                               warnings=_with_admission(warnings, admission))

    async def patch(self, ctx: RequestContext, *, subresource: str = "") -> web.StreamResponse:
        content_type = media_type_of(ctx.request.headers.get("Content-Type"))
        if ctx.definition.custom and content_type == STRATEGIC_PATCH:
            # upstream: custom resources have no patch strategies to merge by
            raise UnsupportedMediaType(
                f"the body of the request was in an unknown format - accepted media types include: "
                f"{', '.join(t for t in PATCH_TYPES if t != STRATEGIC_PATCH)}"
            )
        if content_type not in PATCH_TYPES:
            raise UnsupportedMediaType(
                f"the body of the request was in an unknown format - accepted media types include: "
                f"{', '.join(PATCH_TYPES)}"
            )
        raw = await ctx.request.read()
        if content_type == APPLY_PATCH and not ctx.params.get("fieldManager"):
            raise BadRequest("PATCH /apply requires fieldManager")
        admission = self.admission_for(ctx, Operation.UPDATE, subresource=subresource,
                                       options={"kind": "PatchOptions"})
        result, created, warnings = await patch_object(
            self.store,
            ctx.definition,
            ctx.namespace,
            ctx.path.name,
            content_type,
            raw,
            params=ctx.params,
            subresource=subresource,
            dry_run=ctx.dry_run,
            manager=ctx.manager,
            admission=admission,
        )
        return object_response(ctx.definition, result, ctx.fmt, status=201 if created else 200,
                               warnings=_with_admission(warnings, admission))

    async def delete(self, ctx: RequestContext) -> web.StreamResponse:
        raw = await ctx.request.read()
        body = decode_body(raw, ctx.request.headers.get("Content-Type")) if raw.strip() else None
        opts = parse_delete_options(body if isinstance(body, dict) else None, ctx.params)
        opts.dry_run = opts.dry_run or ctx.dry_run
        hooks = self.delete_hooks.get(ctx.definition.qualified)
        if hooks is not None:
            hooks.admit_delete(ctx.path.name)
        admission = self.admission_for(ctx, Operation.DELETE, dry_run=opts.dry_run, options=opts.to_api())
        reply, deleted = await delete_object(self.store, ctx.definition, ctx.namespace, ctx.path.name, opts,
                                             admission=admission)
        if hooks is not None and not opts.dry_run:
            hooks.after_delete(ctx.path.name)
        status = 200 if deleted else 202
        warnings = _with_admission(None, admission)
        if reply.get("kind") == "Status":
            return json_response(_dumps(reply), status=status, warnings=warnings)
        return object_response(ctx.definition, reply, ctx.fmt, status=status, warnings=warnings)

    async def delete_collection(self, ctx: RequestContext) -> web.StreamResponse:
        raw = await ctx.request.read()
        body = decode_body(raw, ctx.request.headers.get("Content-Type")) if raw.strip() else None
        opts = parse_delete_options(body if isinstance(body, dict) else None, ctx.params)
        opts.dry_run = opts.dry_run or ctx.dry_run
        query = parse_query(ctx.definition, ctx.namespace, ctx.params)
        cache = self.cacher.cache_for(ctx.definition)
        current = await self.storage.current_revision()
        if await self.cacher.wait_for_store_revision(current, timeout=CONSISTENT_READ_TIMEOUT):
            candidates = list(cache.candidates(query.namespace, query.index_value))
        else:
            # the cache is behind: what to delete comes from the store itself
            candidates = await self._stored_objects(ctx.definition, query.namespace, current)
        targets = sorted((o for o in candidates if query.matches(o)), key=lambda o: o.key)
        items: list[Object] = []
        options = opts.to_api()
        for target in targets:
            admission = self.admission_for(ctx, Operation.DELETE, namespace=target.namespace, name=target.name,
                                           dry_run=opts.dry_run, options=options)
            try:
                reply, _ = await delete_object(self.store, ctx.definition, target.namespace, target.name, opts,
                                               admission=admission)
            except NotFound:
                continue
            if reply.get("kind") == ctx.definition.kind:
                items.append(reply)
            elif ctx.definition.converter is not None:
                items.extend(await to_served(ctx.definition, [target.decode()]))
            else:
                items.append(target.decode())
        body_out = {
            "kind": ctx.definition.list_kind,
            "apiVersion": ctx.definition.api_version,
            "metadata": {"resourceVersion": str(self.cacher.revision)},
            "items": items,
        }
        return json_response(_dumps(body_out))

    async def _stored_objects(self, definition: ResourceDefinition, namespace: str, revision: int) -> list[CachedObject]:
        """Every object of the resource (in ``namespace``) as the store has them at ``revision``."""
        prefix = definition.namespace_prefix(namespace)
        out: list[CachedObject] = []
        after = ""
        while True:
            page = await self.storage.list(prefix, revision=revision, limit=500, start_after=after)
            for kv in page.kvs:
                after = kv.key
                try:
                    out.append(build_cached_object(definition, kv.key, kv.value, kv.mod_revision))
                except Exception:
                    continue  # undecodable: the cache skips it too (and counts it)
            if not page.more:
                return out


def _with_admission(warnings: list[str] | None, admission: RequestAdmission | None) -> list[str] | None:
    """The request's warnings, then those the admission plugins added."""
    if admission is None or not admission.warnings:
        return warnings
    return [*(warnings or ()), *admission.warnings]


def _dumps(value: Any) -> bytes:
    return orjson.dumps(value)
