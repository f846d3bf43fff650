"""The HTTP surface: one aiohttp Application, routed by path shape.

Middlewares, outermost first: Status errors and metrics, then the server's
(authentication: ``request[USER_KEY]``, 401; impersonation; authorization:
403). Non-resource paths (``/version``, health,
``/metrics``, discovery, ``/openapi/v3``) are answered here; every resource path goes to
:class:`~k8py.apiserver.handlers.verbs.ResourceHandlers`. A middleware turns
:class:`~k8py.api.errors.StatusError` (and anything unexpected) into a
``Status`` body and records request metrics. What is served is kept apart
from how it is served: :mod:`k8py.apiserver.server` owns the sockets.
"""

from __future__ import annotations

import logging
import platform
import time
from typing import Awaitable, Callable, Mapping, Sequence

import orjson
from aiohttp import web
from aiohttp.web_urldispatcher import UrlMappingMatchInfo

from k8py import __version__
from k8py.api.errors import BadRequest, InternalError, NotFound, RequestEntityTooLarge, StatusError
from k8py.api.schema import KUBERNETES_VERSION
from k8py.apiserver.aggregator import Aggregator
from k8py.apiserver.openapi.discovery import Discovery, aggregated_media_type
from k8py.apiserver.handlers.context import not_found
from k8py.apiserver.handlers.verbs import RequestContext, ResourceHandlers
from k8py.apiserver.flow import FlowRecorder
from k8py.apiserver.metrics import CONTENT_TYPE_LATEST, APIMetrics
from k8py.apiserver.openapi.v2 import PROTOBUF_MEDIA_TYPE, wants_protobuf
from k8py.apiserver.openapi.v3 import OpenAPIService
from k8py.apiserver.handlers.request_info import ResourcePath, parse_resource_path
from k8py.apiserver.streaming import RESOURCE_METRICS
from k8py.apiserver.streaming.resource_metrics import GROUP as METRICS_GROUP

__all__ = ["build_app", "version_info", "MAX_BODY_BYTES"]

log = logging.getLogger(__name__)

#: upstream's limit on request bodies (3 MiB)
MAX_BODY_BYTES = 3 * 1024 * 1024

#: what a request was, for metrics (set once the path is resolved)
#: the request metrics' labels but the code: (verb, dry_run, group, version, resource, subresource, scope)
METRIC_LABELS_KEY = web.RequestKey("k8py.metric-labels", tuple)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Middleware = Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]


def version_info() -> dict[str, str]:
    major, minor, _ = KUBERNETES_VERSION.split(".")
    return {
        "major": major,
        "minor": minor,
        "gitVersion": f"v{KUBERNETES_VERSION}-k8py.{__version__}",
        "gitCommit": "k8py",
        "gitTreeState": "clean",
        "buildDate": "2026-11-30T00:00:00Z",
        "goVersion": f"python{platform.python_version()}",
        "compiler": "cpython",
        "platform": f"linux/{'amd64' if platform.machine() in ('x86_64', 'AMD64') else platform.machine()}",
    }


#: kube-apiserver labels requests by HTTP method, except LIST / WATCH / APPLY
_METRIC_VERBS = {"create": "POST", "update": "PUT", "deletecollection": "DELETE"}


#: subresources whose requests kube-apiserver counts as CONNECT (streams and proxies)
_CONNECT_SUBRESOURCES = frozenset({"exec", "attach", "portforward", "proxy"})


def _metric_verb(verb: str, request: web.Request, subresource: str = "") -> str:
    if verb == "patch" and request.content_type == "application/apply-patch+yaml":
        return "APPLY"
    if subresource.split("/", 1)[0] in _CONNECT_SUBRESOURCES:
        return "CONNECT"
    return _METRIC_VERBS.get(verb, verb.upper())


def _metric_labels(verb: str, request: web.Request, path: ResourcePath, plural: str) -> tuple[str, ...]:
    """As upstream's ``apiserver_request_total``: verb, dry_run, group, version, resource,
    subresource and scope (``resource`` for one named object, ``namespace`` for a namespace's
    collection, ``cluster`` otherwise)."""
    scope = "resource" if path.name else "namespace" if path.namespace else "cluster"
    dry_run = "All" if "dryRun" in request.query_string and request.query.get("dryRun") == "All" else ""
    return (_metric_verb(verb, request, path.subresource), dry_run, path.group, path.version, plural,
            path.subresource, scope)


_WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


def _record_write(flow: FlowRecorder, request: web.Request, ctx: RequestContext, verb: str, response: web.StreamResponse) -> None:
    if verb not in _WRITE_VERBS or "dryRun" in request.query:
        return
    body = getattr(response, "body", None)
    flow.record_write(user_agent=request.headers.get("User-Agent", ""), verb=verb, resource=ctx.definition.plural,
                      subresource=ctx.path.subresource, namespace=ctx.namespace, name=ctx.path.name, code=response.status,
                      body=body if isinstance(body, bytes) else None)


async def serve_flow(request: web.Request, flow: FlowRecorder | None) -> web.StreamResponse:
    """``GET /debug/flow[?since=SEQ][&follow=true]``: the recorded flow as JSON lines (see :mod:`k8py.apiserver.flow`)."""
    if flow is None:
        raise NotFound("the list-watch flow is not being recorded: start the API server with --trace (k8py up --trace)")
    try:
        seq = int(request.query.get("since", "0") or 0)
    except ValueError:
        raise BadRequest(f"since must be a record number (an integer), not {request.query['since']!r}") from None
    follow = request.query.get("follow", "") in ("1", "true")
    response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
    await response.prepare(request)
    while True:
        records = flow.since(seq)
        if records:
            seq = records[-1]["seq"]
            await response.write(b"".join(orjson.dumps(r) + b"\n" for r in records))
        if not follow:
            break
        if request.transport is None or request.transport.is_closing():
            break
        await flow.wait(seq, timeout=5.0)
    await response.write_eof()
    return response


def _status_response(err: StatusError) -> web.Response:
    response = web.Response(body=err.to_bytes(), status=err.code, headers={"Content-Type": "application/json"})
    if err.retry_after_seconds:
        response.headers["Retry-After"] = str(err.retry_after_seconds)
    return response


def build_app(
    *,
    handlers: ResourceHandlers,
    discovery: Discovery,
    openapi: OpenAPIService,
    metrics: APIMetrics,
    is_ready: Callable[[], bool],
    aggregator: Aggregator | None = None,
    non_resource: Mapping[str, Handler] | None = None,
    middlewares: Sequence[Middleware] = (),
) -> web.Application:
    """``non_resource``: more non-resource paths, each answered by its handler
    (the service-account issuer's OIDC discovery documents). ``middlewares``
    run inside the Status-rendering one, in order (authentication,
    impersonation, then authorization)."""
    extra_paths = dict(non_resource or {})
    version_body = orjson.dumps(version_info())

    def json_body(body: bytes, content_type: str = "application/json") -> web.Response:
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def route(request: web.Request) -> web.StreamResponse:
        path = request.path
        if len(path) > 1 and path.endswith("/"):
            path = path.rstrip("/")
        if path == "/version":
            return json_body(version_body)
        extra = extra_paths.get(path)
        if extra is not None:
            return await extra(request)
        if path in ("/healthz", "/livez", "/readyz") or path.startswith(("/healthz/", "/livez/", "/readyz/")):
            if path.startswith("/readyz") and not is_ready():
                return web.Response(status=500, text="[-]informer-sync failed: the watch cache is not ready\nreadyz check failed\n")
            return web.Response(text="ok", content_type="text/plain")
        if path == "/metrics":
            return web.Response(body=metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST})
        if path == "/debug/flow":
            return await serve_flow(request, handlers.flow)
        if path in ("/api", "/apis"):
            media = aggregated_media_type(request.headers.get("Accept"))
            if media is not None:
                body = discovery.aggregated(core=path == "/api", media_type=media)
                response = json_body(body, media)
                response.headers["Vary"] = "Accept"
                return response
            if path == "/api":
                return json_body(discovery.api_versions(request.host or "127.0.0.1"))
            return json_body(discovery.api_group_list())
        if aggregator is not None and path.startswith("/apis/"):
            remote = aggregator.remote_for(path)
            if remote is not None:  # a group/version an aggregated API server serves
                return await aggregator.proxy(request, remote)
        if path == "/openapi/v2":
            protobuf = wants_protobuf(request.headers.get("Accept"))
            response = web.Response(body=openapi.swagger(protobuf=protobuf),
                                    content_type=PROTOBUF_MEDIA_TYPE if protobuf else "application/json")
            response.headers["Vary"] = "Accept"
            return response
        if path == "/openapi/v3":
            remote_paths = aggregator.openapi_paths() if aggregator is not None else {}
            if not remote_paths:
                return json_body(openapi.root())
            root = orjson.loads(openapi.root())
            root.setdefault("paths", {}).update(remote_paths)
            return json_body(orjson.dumps(root))
        if aggregator is not None and path.startswith("/openapi/v3/apis/"):
            remote = aggregator.remote_for(path[len("/openapi/v3"):])
            if remote is not None:
                return await aggregator.proxy(request, remote)
        if path.startswith("/openapi/v3/"):
            doc = openapi.document(path[len("/openapi/v3/") :])
            if doc is None:
                raise not_found()
            return json_body(doc)
        parts = [p for p in path.split("/") if p]
        if len(parts) == 2 and parts[0] == "api":
            body = discovery.resource_list("", parts[1])
        elif len(parts) == 2 and parts[0] == "apis":
            body = discovery.api_group(parts[1])
        elif len(parts) == 3 and parts[0] == "apis":
            body = discovery.resource_list(parts[1], parts[2])
        else:
            resource_path = parse_resource_path(path)
            if resource_path is None:
                raise not_found()
            ctx = handlers.resolve(request, resource_path)
            request[METRIC_LABELS_KEY] = _metric_labels(handlers.verb(ctx), request, resource_path, ctx.definition.plural)
            if resource_path.group == METRICS_GROUP and RESOURCE_METRICS in request.app and not resource_path.subresource:
                # never stored: computed from the kubelets' resource metrics
                return await request.app[RESOURCE_METRICS].serve(
                    request, plural=resource_path.plural, namespace=resource_path.namespace, name=resource_path.name
                )
            response = await handlers.handle(ctx)
            if handlers.flow is not None and 200 <= response.status < 300:
                _record_write(handlers.flow, request, ctx, handlers.verb(ctx), response)
            return response
        if body is None:
            raise not_found()
        return json_body(body)

    @web.middleware
    async def status_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
        start = time.perf_counter()
        code = 500
        try:
            response = await handler(request)
            code = response.status
            return response
        except StatusError as err:
            code = err.code
            return _status_response(err)
        except web.HTTPRequestEntityTooLarge:
            code = 413
            return _status_response(
                RequestEntityTooLarge(f"the request body is larger than the limit of {MAX_BODY_BYTES} bytes")
            )
        except web.HTTPException:
            raise
        except Exception as err:  # a bug must become a 500 Status, not a dropped connection
            log.exception("request failed", extra={"method": request.method, "path": request.path})
            code = 500
            return _status_response(InternalError(f"an error on the server ({type(err).__name__}) has prevented the request from succeeding"))
        finally:
            labels = request.get(METRIC_LABELS_KEY)
            if labels is not None:
                metrics.observe(labels, code, time.perf_counter() - start)

    app = web.Application(middlewares=[status_errors, *middlewares], client_max_size=MAX_BODY_BYTES)
    only = app.router.add_route("*", "/{tail:.*}", route)

    async def resolve(request: web.Request) -> UrlMappingMatchInfo:
        # one route takes every path and method: its match, without the dispatcher's walk over
        # path prefixes and the pattern (``tail`` is not filled: route() reads request.path)
        return UrlMappingMatchInfo({}, only)

    app.router.resolve = resolve  # type: ignore[method-assign]
    return app

