"""The authorization step of every request: after authentication, before any handler.

:func:`authorization_middleware` reads the identity the authentication step
left in ``request[USER_KEY]`` (:data:`UNSECURED` when no authenticator ran:
the insecure port and a server without authenticators), derives the
request's :class:`Attributes` from its path and method, and asks the
authorizer chain. A request not allowed gets 403 with upstream's message.

The identity is also made the task's :data:`REQUEST_USER` for the request's
duration, so that checks deep in the write path that must know who asks
(the RBAC escalation and bind checks, NodeRestriction) can read it without
every layer passing it on.
"""

from __future__ import annotations

import contextvars
import dataclasses
from typing import Awaitable, Callable

from aiohttp import web

from k8py.apiserver.authn.user import UNSECURED, USER_KEY, UserInfo
from k8py.apiserver.authz.attributes import Attributes, Authorizer, Decision
from k8py.apiserver.authz.chain import forbidden
from k8py.apiserver.authz.request_attributes import request_attributes

__all__ = ["authorization_middleware", "REQUEST_USER", "current_user", "AUTHORIZER", "CONSISTENT"]

#: the server's authorizer chain (the access reviews ask it)
AUTHORIZER = web.AppKey("k8py.authorizer", object)
#: awaits the watch cache catching up with the store (before a negative answer is final)
CONSISTENT = web.AppKey("k8py.authz_consistent", object)

#: who the request being served comes from (None outside a request: the server's own writes)
REQUEST_USER: contextvars.ContextVar[UserInfo | None] = contextvars.ContextVar("k8py_request_user", default=None)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


_STREAMS = frozenset({"exec", "attach", "portforward"})


def _websocket_stream(request: web.Request, attributes: Attributes) -> bool:
    return (attributes.verb == "get" and attributes.resource == "pods" and attributes.subresource in _STREAMS
            and attributes.api_group == "" and request.headers.get("Upgrade", "").lower() == "websocket")


def current_user() -> UserInfo | None:
    return REQUEST_USER.get()


def authorization_middleware(authorizer: Authorizer, consistent: Callable[[], Awaitable[bool]] | None = None,
                             ) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
    """``consistent`` (the watch cache catching up with the store) is awaited
    before a refusal is final: a request is judged on every RBAC write that
    completed before it, not only on those the cache has seen (upstream's
    informers give no such promise; a client that just created its binding
    would otherwise see a spurious 403). Allowed requests never wait."""

    shortcut = getattr(authorizer, "allows_everything", None)

    @web.middleware
    async def authorize(request: web.Request, handler: Handler) -> web.StreamResponse:
        user = request.get(USER_KEY) or UNSECURED
        if shortcut is not None and shortcut(user):  # system:masters: no attributes to derive, nothing to look up
            token = REQUEST_USER.set(user)
            try:
                return await handler(request)
            finally:
                REQUEST_USER.reset(token)
        attributes = request_attributes(user, request.method, request.path, request.query)
        decision, reason = await authorizer.authorize(attributes)
        if decision is Decision.NO_OPINION and consistent is not None:
            await consistent()
            decision, reason = await authorizer.authorize(attributes)
        if decision is not Decision.ALLOW:
            raise forbidden(attributes, reason)
        if _websocket_stream(request, attributes):
            # upstream 1.31+ (AuthorizePodWebsocketUpgradeCreatePermission, on by default): a WebSocket
            # GET of exec, attach or portforward also needs ``create``, as the POST it replaces did
            create = dataclasses.replace(attributes, verb="create")
            decision, reason = await authorizer.authorize(create)
            if decision is not Decision.ALLOW:
                raise forbidden(create, reason)
        token = REQUEST_USER.set(user)
        try:
            return await handler(request)
        finally:
            REQUEST_USER.reset(token)

    return authorize
