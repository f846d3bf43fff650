"""``authentication.k8s.io/v1`` SelfSubjectReview: who am I (``kubectl auth whoami``).

Never stored: a ``create`` answers 201 with the request's own user — after
impersonation, so ``kubectl auth whoami --as bob`` shows bob — in
``status.userInfo``, as upstream's REST storage does. The body sent is not
needed (the kind has no spec) and is not read.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from k8py.apiserver.authn.user import UNSECURED, USER_KEY

__all__ = ["GROUP", "serve_self_subject_review"]

GROUP = "authentication.k8s.io"


async def serve_self_subject_review(ctx: Any) -> web.Response:
    """The create handler of ``selfsubjectreviews.authentication.k8s.io`` (see ResourceHandlers.create_handlers).

    ``ctx`` is the handlers' RequestContext (the handlers sit above authn, so
    it is not imported here): its ``request`` and ``definition`` are read."""
    request, version = ctx.request, ctx.definition.version
    user = request.get(USER_KEY, UNSECURED)
    body = {
        "kind": "SelfSubjectReview",
        "apiVersion": f"{GROUP}/{version}",
        "metadata": {"creationTimestamp": None},
        "status": {"userInfo": user.to_api()},
    }
    return web.Response(status=201, body=orjson.dumps(body), headers={"Content-Type": "application/json"})
