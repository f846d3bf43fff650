"""The authenticator chain and its middleware (upstream ``pkg/authentication``).

Order, as kube-apiserver builds it::

    union(x509, bearer token → token authenticators, websocket-protocol token)
        → add system:authenticated → fail on error, else anonymous

- Request authenticators (x509) are asked first, then the bearer token (the
  ``Authorization: Bearer`` header, or the ``base64url.bearer.authorization.k8s.io.``
  WebSocket subprotocol) is offered to each token authenticator in order.
- The first to answer with a user wins. A credential that no one accepts
  while at least one said it was invalid (raised
  :class:`~k8py.api.errors.Unauthorized`), and a bearer token that no token
  authenticator knows, are 401 ``Unauthorized`` — whether or not anonymous
  requests are allowed, as upstream.
- A request with no credential at all is :data:`ANONYMOUS` when
  ``anonymous`` is on, else 401.
- A plain-HTTP request (the insecure port) is :data:`UNSECURED` and never
  goes through the chain.
- A request whose identity an outer middleware already set (an embedding
  that authenticates by other means; the RBAC tests' stand-in) keeps it.

``request_authenticators`` and ``token_authenticators`` are public lists:
other parts of the server append theirs (service-account and bootstrap
tokens) after construction, before the server starts serving.
"""

from __future__ import annotations

import base64
import binascii
import logging
from typing import Awaitable, Callable

from aiohttp import web

from k8py.api.errors import Unauthorized
from k8py.apiserver.authn.authenticator import RequestAuthenticator, TokenAuthenticator
from k8py.apiserver.authn.user import (
    ALL_AUTHENTICATED, ALL_UNAUTHENTICATED, ANONYMOUS, ANONYMOUS_USER, UNSECURED, USER_KEY, UserInfo,
)

__all__ = ["AuthenticatorChain", "authentication_middleware", "bearer_token"]

log = logging.getLogger(__name__)

_WS_TOKEN_PREFIX = "base64url.bearer.authorization.k8s.io."

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def bearer_token(request: web.Request) -> str | None:
    """The request's bearer token (header, else WebSocket subprotocol), or None."""
    header = request.headers.get("Authorization", "")
    parts = header.split(" ")
    if len(parts) >= 2 and parts[0].lower() == "bearer" and parts[1]:
        return parts[1]
    if request.headers.get("Upgrade", "").lower() == "websocket":
        for proto in request.headers.get("Sec-WebSocket-Protocol", "").split(","):
            proto = proto.strip()
            if proto.startswith(_WS_TOKEN_PREFIX):
                encoded = proto[len(_WS_TOKEN_PREFIX):]
                try:
                    token = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
                except (binascii.Error, UnicodeDecodeError):
                    return None
                return token or None
    return None


def _with_authenticated_group(user: UserInfo) -> UserInfo:
    if user.name == ANONYMOUS_USER or ALL_AUTHENTICATED in user.groups or ALL_UNAUTHENTICATED in user.groups:
        return user
    return UserInfo(user.name, uid=user.uid, groups=(*user.groups, ALL_AUTHENTICATED), extra=user.extra)


#: how many authenticators' users keep their system:authenticated copy (see AuthenticatorChain._grouped)
_GROUPED_KEPT = 1024


class AuthenticatorChain:
    """Who a request over TLS is (see the module docstring)."""

    def __init__(self, *, request_authenticators: list[RequestAuthenticator] | None = None,
                 token_authenticators: list[TokenAuthenticator] | None = None,
                 anonymous: bool = True) -> None:
        self.request_authenticators: list[RequestAuthenticator] = list(request_authenticators or ())
        self.token_authenticators: list[TokenAuthenticator] = list(token_authenticators or ())
        self.anonymous = anonymous
        #: id(an authenticator's user) -> (that user, its copy with system:authenticated): the x509
        #: and token authenticators keep the user of a credential they have seen, so a request
        #: with it finds its copy instead of building one (the first element pins the id)
        self._grouped: dict[int, tuple[UserInfo, UserInfo]] = {}

    def _authenticated(self, user: UserInfo) -> UserInfo:
        kept = self._grouped.get(id(user))
        if kept is not None and kept[0] is user:
            return kept[1]
        grouped = _with_authenticated_group(user)
        if len(self._grouped) >= _GROUPED_KEPT:
            self._grouped.clear()
        self._grouped[id(user)] = (user, grouped)
        return grouped

    async def authenticate(self, request: web.Request) -> UserInfo:
        """The user, or :class:`Unauthorized` (401) as upstream answers."""
        failed = False
        for authenticator in self.request_authenticators:
            try:
                user = await authenticator.authenticate_request(request)
            except Unauthorized:
                failed = True
                continue
            if user is not None:
                return self._authenticated(user)
        token = bearer_token(request)
        if token is not None:
            for token_authenticator in self.token_authenticators:
                try:
                    user = await token_authenticator.authenticate_token(token)
                except Unauthorized:
                    continue
                if user is not None:
                    return self._authenticated(user)
            failed = True  # upstream: "invalid bearer token"
        if failed:
            log.info("unauthorized request", extra={"path": request.path, "remote": request.remote})
            raise Unauthorized("Unauthorized")
        if self.anonymous:
            return ANONYMOUS
        raise Unauthorized("Unauthorized")


def authentication_middleware(chain: AuthenticatorChain) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
    """Fill ``request[USER_KEY]`` before any handler: the chain over TLS, UNSECURED on plain HTTP."""

    @web.middleware
    async def authentication(request: web.Request, handler: Handler) -> web.StreamResponse:
        transport = request.transport
        if len(request) and USER_KEY in request:  # (len first: a miss costs a KeyError inside)
            pass  # authenticated by an outer middleware (see the module docstring)
        elif transport is None or transport.get_extra_info("ssl_object") is None:
            request[USER_KEY] = UNSECURED
        else:
            request[USER_KEY] = await chain.authenticate(request)
        return await handler(request)

    return authentication
