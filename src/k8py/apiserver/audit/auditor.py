"""The audit filter: an ``audit.k8s.io/v1`` Event per stage of every request the policy selects.

Upstream's ``WithAudit``: it sits after authentication (the Event names the
user) and before authorization (a forbidden request is audited too). For a
request whose level is not ``None``:

- ``RequestReceived`` is written before the request is handled;
- ``ResponseStarted`` when the headers of a long-running response (a watch,
  exec, a followed log) go out;
- ``ResponseComplete`` when the response is done, with ``responseStatus``;
- ``Panic`` instead, when the handler failed with an unexpected error;

each unless the policy omits that stage. ``Metadata`` events carry the
request's identity and target; ``Request`` adds the request body as
``requestObject``; ``RequestResponse`` adds the response body as
``responseObject``. Annotations that authorization and admission plugins add
(``request[ANNOTATIONS_KEY]``: PodSecurity's ``pod-security.kubernetes.io/*``)
appear from the stage after they were added. A request that fails
authentication (401) is audited by :meth:`Auditor.failed_authentication_middleware`,
outside authentication, as upstream: one ``ResponseStarted`` event, no user,
``responseStatus.message`` naming the credentials tried. ``auditID`` is the request's
``Audit-Id`` header if it sent one, else a new UUID, and is returned in the
``Audit-Id`` response header, as upstream.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import time
import uuid
from typing import Any, Awaitable, Callable

import orjson
from aiohttp import web

from k8py.api.errors import StatusError, Unauthorized
from k8py.apiserver.audit.log_backend import LogBackend
from k8py.apiserver.audit.policy import AuditPolicy, RequestFacts
from k8py.apiserver.authn.user import UNSECURED, USER_KEY
from k8py.apiserver.authz.request_attributes import request_attributes

__all__ = ["Auditor", "ANNOTATIONS_KEY", "AUDIT_KEY", "describe_request"]

log = logging.getLogger(__name__)

#: the request's audit annotations (a dict plugins add to)
ANNOTATIONS_KEY = web.RequestKey("k8py.audit_annotations", dict)
#: the request's audit record while it is in flight
AUDIT_KEY = web.RequestKey("k8py.audit", dict)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Describe = Callable[[web.Request], RequestFacts]


#: audit.k8s.io/v1 ObjectReference's field order
_REF_ORDER = ("resource", "namespace", "name", "uid", "apiGroup", "apiVersion", "resourceVersion", "subresource")
_LONG_RUNNING_SUBRESOURCES = frozenset({"exec", "attach", "portforward", "proxy"})


def describe_request(request: web.Request) -> RequestFacts:
    """The request as the policy sees it (the authorizer's reading of the path: verb, resource, ...)."""
    user = request.get(USER_KEY, UNSECURED)
    a = request_attributes(user, request.method, request.path, request.query)
    sub = a.subresource.split("/", 1)[0]
    long_running = a.verb == "watch" or sub in _LONG_RUNNING_SUBRESOURCES or (
        sub == "log" and request.query.get("follow") in ("1", "true", "True"))
    return RequestFacts(user.name, tuple(user.groups), a.verb, a.resource_request, a.api_group, a.resource, a.subresource,
                        a.namespace, a.name, request.path, a.api_version, long_running)


def _auth_methods(request: web.Request) -> str:
    """What a failed request tried, in upstream's words (``getAuthMethods``)."""
    tried = []
    scheme, _, rest = request.headers.get("Authorization", "").strip().partition(" ")
    if scheme.lower() == "basic":
        tried.append("basic")
    if scheme.lower() == "bearer" and rest.strip():
        tried.append("bearer")
    if request.query.get("access_token", "").strip():
        tried.append("access_token")
    transport = request.transport
    ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
    if ssl_object is not None and ssl_object.getpeercert(binary_form=True):
        tried.append("x509")
    return f"Authentication failed, attempted: {', '.join(tried)}" if tried else "Authentication failed, no credentials provided"


def _micro(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _strip_managed(obj: Any) -> Any:
    if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict) and "managedFields" in obj["metadata"]:
        obj = {**obj, "metadata": {k: v for k, v in obj["metadata"].items() if k != "managedFields"}}
    return obj


def _json_or_none(body: bytes | None) -> Any:
    if not body:
        return None
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return None


class Auditor:
    def __init__(self, policy: AuditPolicy, backend: LogBackend, describe: Describe = describe_request, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.policy = policy
        self.backend = backend
        self.describe = describe
        self.clock = clock

    def _write(self, event: dict[str, Any], stage: str, omit: frozenset[str], annotations: dict[str, str]) -> None:
        if stage in omit:
            return
        event["stage"] = stage
        event["stageTimestamp"] = _micro(self.clock())
        if annotations:
            event["annotations"] = dict(annotations)
        try:
            self.backend.write(orjson.dumps(event) + b"\n")
        except OSError as err:  # a full disk must not fail the request; upstream logs and drops too
            log.error("audit event not written", extra={"error": str(err)})

    def _base(self, request: web.Request, facts: RequestFacts, level: str, audit_id: str) -> dict[str, Any]:
        user = request.get(USER_KEY, UNSECURED)
        event: dict[str, Any] = {
            "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": level, "auditID": audit_id,
            "stage": "", "requestURI": request.rel_url.raw_path_qs if hasattr(request.rel_url, "raw_path_qs") else str(request.rel_url),
            "verb": facts.verb, "user": user.to_api(),
            "sourceIPs": [request.remote or "127.0.0.1"],
        }
        agent = request.headers.get("User-Agent")
        if agent:
            event["userAgent"] = agent
        if facts.resource_request:
            ref: dict[str, Any] = {"resource": facts.resource}
            if facts.namespace:
                ref["namespace"] = facts.namespace
            if facts.name:
                ref["name"] = facts.name
            if facts.api_group:
                ref["apiGroup"] = facts.api_group
            ref["apiVersion"] = facts.api_version
            if facts.subresource:
                ref["subresource"] = facts.subresource
            event["objectRef"] = ref
        event["requestReceivedTimestamp"] = _micro(self.clock())
        return event

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        facts = self.describe(request)
        level, omit, omit_managed = self.policy.level_for(facts)
        if level == "None":
            return await handler(request)
        audit_id = request.headers.get("Audit-Id") or str(uuid.uuid4())
        annotations: dict[str, str] = {}
        request[ANNOTATIONS_KEY] = annotations
        event = self._base(request, facts, level, audit_id)
        if request.can_read_body and request.method in ("POST", "PUT", "PATCH") and "objectRef" in event:
            body = _json_or_none(await request.read())
            meta = body.get("metadata") if isinstance(body, dict) else None
            if isinstance(meta, dict):  # upstream's LogRequestObject: the object names what a create targets
                ref = event["objectRef"]
                for field in ("namespace", "name", "uid", "resourceVersion"):
                    if meta.get(field) and not ref.get(field):
                        ref[field] = meta[field]
                event["objectRef"] = {k: ref[k] for k in _REF_ORDER if k in ref}
            if body is not None and level in ("Request", "RequestResponse"):
                event["requestObject"] = _strip_managed(body) if omit_managed else body
        self._write(event, "RequestReceived", omit, annotations)
        request[AUDIT_KEY] = {"event": event, "omit": omit, "started": False, "id": audit_id, "long_running": facts.long_running}
        try:
            response = await handler(request)
        except StatusError as err:
            event["responseStatus"] = {"metadata": {}, "status": "Failure", "message": err.message, "reason": err.reason,
                                       "code": err.code}
            self._write(event, "ResponseComplete", omit, annotations)
            raise
        except web.HTTPException as err:
            event["responseStatus"] = {"metadata": {}, "code": err.status}
            self._write(event, "ResponseComplete", omit, annotations)
            raise
        except Exception as err:
            event["responseStatus"] = {"metadata": {}, "status": "Failure", "message": f"APIServer panic'd: {type(err).__name__}",
                                       "reason": "InternalError", "code": 500}
            self._write(event, "Panic", omit, annotations)
            raise
        status: dict[str, Any] = {"metadata": {}, "code": response.status}
        body = getattr(response, "body", None)
        if response.status >= 400 and isinstance(body, bytes):
            parsed = _json_or_none(body)
            if isinstance(parsed, dict) and parsed.get("kind") == "Status":
                status = {"metadata": {}, "status": parsed.get("status", "Failure"), "message": parsed.get("message", ""),
                          "reason": parsed.get("reason", ""), "code": response.status}
        event["responseStatus"] = status
        if level == "RequestResponse" and isinstance(body, bytes) and not response.prepared:
            parsed = _json_or_none(body)
            if parsed is not None:
                event["responseObject"] = _strip_managed(parsed) if omit_managed else parsed
        if not response.prepared:
            response.headers["Audit-Id"] = audit_id
        self._write(event, "ResponseComplete", omit, annotations)
        return response

    async def on_response_prepare(self, request: web.Request, response: web.StreamResponse) -> None:
        """aiohttp's response signal: the headers are going out (``ResponseStarted`` for long-running requests)."""
        record = request.get(AUDIT_KEY)
        if record is None:
            return
        response.headers.setdefault("Audit-Id", record["id"])
        if record["started"] or not record["long_running"]:
            return
        record["started"] = True
        event = dict(record["event"])
        event["responseStatus"] = {"metadata": {}, "code": response.status}
        self._write(event, "ResponseStarted", record["omit"], request.get(ANNOTATIONS_KEY) or {})

    @web.middleware
    async def failed_authentication_middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Upstream's ``WithFailedAuthenticationAudit``, outside authentication: a 401 is audited
        as one ``ResponseStarted`` event with no user and the credentials that were tried."""
        try:
            return await handler(request)
        except Unauthorized as err:
            if USER_KEY in request:
                raise  # authenticated: a 401 from further in is the handler's, audited by the middleware
            self._failed_authentication(request, err)
            raise

    def _failed_authentication(self, request: web.Request, err: Unauthorized) -> None:
        facts = self.describe(request)
        facts = dataclasses.replace(facts, user="", groups=())
        level, omit, _ = self.policy.level_for(facts)
        if level == "None":
            return
        audit_id = request.headers.get("Audit-Id") or str(uuid.uuid4())
        event = self._base(request, facts, level, audit_id)
        event["user"] = {}
        event["responseStatus"] = {"metadata": {}, "message": _auth_methods(request), "code": err.code}
        self._write(event, "ResponseStarted", omit, {})

    def install(self, app: web.Application) -> None:
        app.on_response_prepare.append(self.on_response_prepare)

    def close(self) -> None:
        self.backend.close()
