"""CertificateSigningRequests: who asked (on create) and ``/approval``.

- :func:`fill_requester` (the CSR resource's create hook): ``spec.username``,
  ``uid``, ``groups`` and ``extra`` become the authenticated user's, whatever
  the body said, as upstream's ``csrStrategy.PrepareForCreate``;
- :func:`approve` (``certificatesigningrequests/NAME/approval``, PUT or
  PATCH): only the Approved/Denied conditions of the body are taken; every
  other condition and the certificate stay as stored. Approved and Denied
  together, or removing an Approved/Denied condition once set, is a 422.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from aiohttp import web

from k8py.api.errors import BadRequest, Cause, Invalid, MethodNotAllowed
from k8py.api.patch import apply_patch
from k8py.apiserver.admission.attributes import Operation
from k8py.apiserver.authn.user import UNSECURED, USER_KEY
from k8py.apiserver.handlers.codec import PATCH_TYPES, decode_body, media_type_of
from k8py.apiserver.handlers.context import RequestContext, SubresourceHost
from k8py.apiserver.handlers.responses import object_response
from k8py.apiserver.registry import ResourceDefinition
from k8py.apiserver.resources.certificates import APPROVAL_TYPES
from k8py.apiserver.validation.certificates import validate_csr

__all__ = ["fill_requester", "approve"]

Object = dict[str, Any]


def fill_requester(ctx: RequestContext, obj: Object) -> None:
    user = ctx.request.get(USER_KEY) or UNSECURED
    spec = obj.setdefault("spec", {})
    for key in ("username", "uid", "groups", "extra"):
        spec.pop(key, None)
    spec["username"] = user.name
    if user.uid:
        spec["uid"] = user.uid
    if user.groups:
        spec["groups"] = list(user.groups)
    if user.extra:
        spec["extra"] = {k: list(v) for k, v in user.extra.items()}


async def approve(host: SubresourceHost, ctx: RequestContext, d: ResourceDefinition, verb: str) -> web.StreamResponse:
    if verb == "get":
        obj = await host.store.get(d, "", ctx.path.name)
        return object_response(d, obj, ctx.fmt)
    if verb not in ("update", "patch"):
        raise MethodNotAllowed(f"{ctx.request.method} is not supported on certificatesigningrequests/approval")
    raw = await ctx.request.read()
    content_type = media_type_of(ctx.request.headers.get("Content-Type"))
    if verb == "patch" and content_type not in PATCH_TYPES[:3]:
        raise BadRequest(f"unsupported patch type for the approval subresource: {content_type}")
    body = None if verb == "patch" else decode_body(raw, ctx.request.headers.get("Content-Type"))
    if body is not None and not isinstance(body, dict):
        raise BadRequest("the body of the request must be a CertificateSigningRequest object")
    pinned = bool(((body or {}).get("metadata") or {}).get("resourceVersion"))
    name = ctx.path.name

    def mutate(current: Object) -> Object:
        wanted = body if body is not None else apply_patch(
            content_type, current, raw, schema_name="io.k8s.api.certificates.v1.CertificateSigningRequest")
        old_conditions = list((current.get("status") or {}).get("conditions") or ())
        new_approval = [c for c in ((wanted.get("status") or {}).get("conditions") or ()) if isinstance(c, dict)
                        and c.get("type") in APPROVAL_TYPES]
        causes = []
        for old in old_conditions:
            if old.get("type") in APPROVAL_TYPES and not any(c.get("type") == old.get("type") for c in new_approval):
                causes.append(Cause("FieldValueForbidden", f'Forbidden: updates may not remove a condition of type "{old["type"]}"', "status.conditions"))
        status = dict(current.get("status") or {})
        status["conditions"] = [c for c in old_conditions if c.get("type") not in APPROVAL_TYPES] + new_approval
        new = dict(current)
        new["status"] = status
        causes += validate_csr(new, current)
        if causes:
            raise Invalid.for_object("CertificateSigningRequest", name, causes, "certificates.k8s.io")
        rv = (wanted.get("metadata") or {}).get("resourceVersion")
        if pinned and rv:
            new["metadata"] = dict(current["metadata"], resourceVersion=rv)
        return new

    manager = dataclasses.replace(ctx.manager, subresource="approval")
    obj = await host.store.guaranteed_update(d, "", name, mutate, subresource="approval", dry_run=ctx.dry_run, manager=manager,
                                             admission=host.admission_for(ctx, Operation.UPDATE))
    return object_response(d, obj, ctx.fmt)

