"""``authentication.k8s.io/v1`` TokenReview: "who is this bearer token?", for webhooks and proxies.

POST a TokenReview with ``spec.token`` (and optionally ``spec.audiences``);
nothing is stored, the reply (201) is the review with ``status`` filled as
upstream's ``registry/authentication/tokenreview``:

- ``authenticated: true`` with ``user`` (username, uid, groups, extra) and
  ``audiences`` (those the token was checked against) when one of the API
  server's token authenticators accepts it;
- ``authenticated: false`` (``error`` saying why when an authenticator
  rejected it as its own kind but invalid) otherwise.

An empty ``spec.token`` is a 400 (upstream: "token is required"). The token
authenticators are the server's (:data:`TOKEN_AUTHENTICATORS` on the app):
the same list the authentication chain asks. An authenticator that takes a
TokenReview's audiences has an ``authenticate(token, audiences)`` method.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from k8py.api.errors import BadRequest, StatusError
from k8py.apiserver.authn.authenticator import TokenAuthenticator
from k8py.apiserver.authn.user import UserInfo
from k8py.apiserver.handlers.codec import decode_body
from k8py.apiserver.handlers.context import RequestContext
from k8py.apiserver.handlers.responses import json_response

__all__ = ["review_token", "serve_token_review", "TOKEN_AUTHENTICATORS", "API_AUDIENCES"]

#: the API server's token authenticators, in the chain's order
TOKEN_AUTHENTICATORS = web.AppKey("k8py.token_authenticators", list)
#: the API audiences, what a TokenReview without its own was checked against
API_AUDIENCES = web.AppKey("k8py.api_audiences", tuple)


async def review_token(
    authenticators: list[TokenAuthenticator], token: str, audiences: list[str] | None = None
) -> tuple[UserInfo | None, list[str]]:
    """(the user, or None; the errors of the authenticators that rejected it)."""
    errors: list[str] = []
    for authenticator in authenticators:
        try:
            scoped = getattr(authenticator, "authenticate", None)
            if audiences and scoped is not None:
                user = scoped(token, audiences)
            else:
                user = await authenticator.authenticate_token(token)
        except StatusError as err:
            errors.append(err.message)
            continue
        if user is not None:
            return user, errors
    return None, errors


async def serve_token_review(ctx: RequestContext) -> web.StreamResponse:
    body = decode_body(await ctx.request.read(), ctx.request.headers.get("Content-Type"))
    if not isinstance(body, dict):
        raise BadRequest("the body of the request must be a TokenReview object")
    spec = body.get("spec") or {}
    token = spec.get("token") or ""
    if not isinstance(token, str) or not token:
        raise BadRequest("token is required")
    audiences = [a for a in spec.get("audiences") or () if isinstance(a, str)]
    authenticators = ctx.request.app.get(TOKEN_AUTHENTICATORS) or []
    user, errors = await review_token(authenticators, token, audiences or None)
    status: dict[str, Any] = {"authenticated": user is not None}
    if user is not None:
        status["user"] = user.to_api()
        if audiences:
            status["audiences"] = audiences
        else:
            api_audiences = ctx.request.app.get(API_AUDIENCES)
            if api_audiences:
                status["audiences"] = list(api_audiences)
    else:
        status["user"] = {}
        if errors:
            status["error"] = "[" + ", ".join(errors) + "]" if len(errors) > 1 else errors[0]
    out = {
        "kind": "TokenReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"creationTimestamp": None, **{k: v for k, v in (body.get("metadata") or {}).items() if k == "name"}},
        "spec": spec,
        "status": status,
    }
    return json_response(orjson.dumps(out), status=201)

