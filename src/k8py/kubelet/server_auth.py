"""Who may call the kubelet's server: authentication and authorization as upstream's kubelet.

Every request but ``/healthz`` (what ``k8py up``'s supervisor probes; upstream
serves it unauthenticated on a second port, 10248) goes through
:class:`KubeletAuth`:

1. **Authentication**, first match wins:

   - x509: a client certificate OpenSSL verified against ``--client-ca-file``
     in the handshake: user = CN, groups = O, plus ``system:authenticated``;
   - a bearer token, with ``--authentication-token-webhook``: a
     ``TokenReview`` to the API server (the kubelet's own client). A token
     the API server does not accept is 401, even with anonymous on (upstream's
     union fails on error before anonymous);
   - anonymous (``--anonymous-auth``): ``system:anonymous`` in
     ``system:unauthenticated``; off, the request is 401 ``Unauthorized``.

2. **Authorization** (``--authorization-mode``): ``AlwaysAllow``, or
   ``Webhook``: a ``SubjectAccessReview`` for the attributes upstream's
   kubelet derives from the request (:func:`request_attributes`): verb from
   the HTTP method (POST create, GET/HEAD get, PUT update, PATCH patch,
   DELETE delete), resource ``nodes``, name the node, subresource ``stats``
   (``/stats``), ``metrics`` (``/metrics``), ``log`` (``/logs``), ``spec``
   (``/spec``), ``checkpoint`` (``/checkpoint``), else ``proxy``. Refused:
   403 with upstream's plain-text ``Forbidden (user=U, verb=V, resource=nodes,
   subresource=S)``; the review failing: 500 ``Authorization error (...)``.

Both answers are cached as upstream's webhook clients cache them (tokens 2 min;
allowed 5 min, denied 30 s; by ``clock``, injectable), in bounded maps.
The API server's own identity (``kube-apiserver-kubelet-client``) is allowed
through the bootstrap binding to ``system:kubelet-api-admin``.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Generic, Hashable, Protocol, TypeVar

from aiohttp import web

from k8py.api.errors import StatusError
from k8py.client.resources import Resource
from k8py.client.transport import TransportError

__all__ = ["KubeletAuth", "KubeletUser", "RequestAttributes", "request_attributes", "ANONYMOUS"]

logger = logging.getLogger(__name__)

TOKEN_REVIEWS = Resource("authentication.k8s.io", "v1", "tokenreviews", False, "TokenReview")
SUBJECT_ACCESS_REVIEWS = Resource("authorization.k8s.io", "v1", "subjectaccessreviews", False, "SubjectAccessReview")
MODES = ("AlwaysAllow", "Webhook")
_VERBS = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
#: path prefix -> nodes subresource (upstream's kubelet server auth; everything else is ``proxy``)
_SUBRESOURCES = (("/stats", "stats"), ("/metrics", "metrics"), ("/logs", "log"), ("/spec", "spec"),
                 ("/checkpoint", "checkpoint"))
_UNAUTHENTICATED_PATHS = frozenset({"/healthz"})
_CACHE_SIZE = 4096

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class KubeletUser:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


ANONYMOUS = KubeletUser("system:anonymous", ("system:unauthenticated",))


@dataclass(frozen=True)
class RequestAttributes:
    verb: str
    subresource: str
    name: str


class Creator(Protocol):
    """The part of :class:`k8py.client.rest.RestClient` the reviews need."""

    async def create(self, resource: Resource, obj: Any, **kw: Any) -> dict[str, Any]: ...


def _is_subpath(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + "/")


def request_attributes(method: str, path: str, node_name: str) -> RequestAttributes:
    """The ``nodes`` attributes a request to the kubelet is authorized as (see the module docstring)."""
    subresource = next((sub for prefix, sub in _SUBRESOURCES if _is_subpath(path, prefix)), "proxy")
    return RequestAttributes(_VERBS.get(method.upper(), ""), subresource, node_name)


K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class _TTLCache(Generic[K, V]):
    """Answers kept for a time each, at most ``size`` of them (the oldest go first)."""

    def __init__(self, clock: Callable[[], float], size: int = _CACHE_SIZE) -> None:
        self._clock, self._size = clock, size
        self._items: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def get(self, key: K) -> V | None:
        hit = self._items.get(key)
        if hit is None:
            return None
        if hit[0] <= self._clock():
            del self._items[key]
            return None
        return hit[1]

    def put(self, key: K, value: V, ttl: float) -> None:
        if ttl <= 0:
            return
        self._items[key] = (self._clock() + ttl, value)
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            self._items.popitem(last=False)


def _certificate_user(request: web.Request) -> KubeletUser | None:
    transport = request.transport
    ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
    peer = ssl_object.getpeercert() if ssl_object is not None else None
    if not peer:
        return None
    fields = [item for rdn in peer.get("subject", ()) for item in rdn]
    name = next((v for k, v in fields if k == "commonName"), "")
    if not name:
        return None
    groups = tuple(v for k, v in fields if k == "organizationName")
    return KubeletUser(name, groups + (() if "system:authenticated" in groups else ("system:authenticated",)))


def _bearer_token(request: web.Request) -> str:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def _text(status: int, message: str) -> web.Response:
    return web.Response(status=status, text=message, content_type="text/plain")


class KubeletAuth:
    """The kubelet server's authentication and authorization (see the module docstring)."""

    def __init__(self, *, node_name: str, client: Creator | None = None, anonymous: bool = False,
                 token_webhook: bool = False, authorization_mode: str = "AlwaysAllow",
                 token_cache_ttl: float = 120.0, authorized_ttl: float = 300.0, unauthorized_ttl: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if authorization_mode not in MODES:
            raise ValueError(f"--authorization-mode: unknown mode {authorization_mode!r}; use AlwaysAllow or Webhook")
        if (token_webhook or authorization_mode == "Webhook") and client is None:
            raise ValueError("--authentication-token-webhook and --authorization-mode=Webhook ask the API server: "
                             "give the kubelet a --kubeconfig")
        self.node_name, self.client, self.anonymous = node_name, client, anonymous
        self.token_webhook, self.authorization_mode = token_webhook, authorization_mode
        self.token_cache_ttl, self.authorized_ttl, self.unauthorized_ttl = token_cache_ttl, authorized_ttl, unauthorized_ttl
        self._tokens: _TTLCache[str, KubeletUser | None] = _TTLCache(clock)
        self._decisions: _TTLCache[tuple[KubeletUser, RequestAttributes], bool] = _TTLCache(clock)

    async def authenticate(self, request: web.Request) -> KubeletUser | None:
        """The caller, or None (401)."""
        user = _certificate_user(request)
        if user is not None:
            return user
        token = _bearer_token(request)
        if token:
            return await self._review_token(token) if self.token_webhook else None
        return ANONYMOUS if self.anonymous else None

    async def _review_token(self, token: str) -> KubeletUser | None:
        cached = self._tokens.get(token)
        if cached is not None:
            return cached
        assert self.client is not None
        try:
            review = await self.client.create(TOKEN_REVIEWS, {
                "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}})
        except (StatusError, TransportError, OSError) as err:
            logger.warning("TokenReview failed; the request is unauthorized", extra={"error": str(err)})
            return None
        status = review.get("status") or {}
        if not status.get("authenticated"):
            return None  # not cached: upstream caches only successes for the TTL
        u = status.get("user") or {}
        user = KubeletUser(u.get("username", ""), tuple(u.get("groups") or ()), u.get("uid", ""),
                           tuple(sorted((k, tuple(v)) for k, v in (u.get("extra") or {}).items())))
        self._tokens.put(token, user, self.token_cache_ttl)
        return user

    async def authorize(self, user: KubeletUser, attrs: RequestAttributes) -> bool:
        """Whether ``user`` may; raises StatusError/TransportError when the review cannot be made (500)."""
        if self.authorization_mode == "AlwaysAllow":
            return True
        cached = self._decisions.get((user, attrs))
        if cached is not None:
            return cached
        assert self.client is not None
        spec: dict[str, Any] = {
            "user": user.name, "groups": list(user.groups),
            "resourceAttributes": {"verb": attrs.verb, "group": "", "version": "v1", "resource": "nodes",
                                   "subresource": attrs.subresource, "name": attrs.name}}
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        review = await self.client.create(SUBJECT_ACCESS_REVIEWS, {
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec})
        allowed = bool((review.get("status") or {}).get("allowed"))
        self._decisions.put((user, attrs), allowed, self.authorized_ttl if allowed else self.unauthorized_ttl)
        return allowed

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in _UNAUTHENTICATED_PATHS:
            return await handler(request)
        user = await self.authenticate(request)
        if user is None:
            return _text(401, "Unauthorized")
        attrs = request_attributes(request.method, request.path, self.node_name)
        described = f"user={user.name}, verb={attrs.verb}, resource=nodes, subresource={attrs.subresource}"
        try:
            allowed = await self.authorize(user, attrs)
        except (StatusError, TransportError, OSError) as err:
            logger.error("SubjectAccessReview failed", extra={"error": str(err), "user": user.name})
            return _text(500, f"Authorization error ({described})")
        if not allowed:
            logger.info("forbidden", extra={"user": user.name, "verb": attrs.verb, "subresource": attrs.subresource})
            return _text(403, f"Forbidden ({described})")
        return await handler(request)
