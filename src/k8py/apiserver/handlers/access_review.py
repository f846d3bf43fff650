"""``authorization.k8s.io/v1`` access reviews, answered by the server's authorizer chain.

Nothing is stored; the reply (201) is the review with ``status`` filled as
upstream's ``registry/authorization``:

- SelfSubjectAccessReview: the requesting user; SubjectAccessReview: the
  ``spec.user``/``groups``/``uid``/``extra`` given (one of user or groups is
  required); LocalSubjectAccessReview: as SubjectAccessReview, within the
  review's namespace (``resourceAttributes.namespace`` must be empty or it).
  Exactly one of ``resourceAttributes`` and ``nonResourceAttributes``.
  ``status``: ``allowed``, ``denied`` (an authorizer said no), ``reason``.
- SelfSubjectRulesReview: ``spec.namespace`` is required; ``status`` lists the
  ``resourceRules`` and ``nonResourceRules`` the user holds there, and
  ``incomplete`` (with ``evaluationError``) when some authorizer cannot list
  its rules (the Node authorizer, for nodes) or a role could not be resolved.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

import orjson
from aiohttp import web

from k8py.api.errors import BadRequest, Invalid, Cause
from k8py.apiserver.authn.user import UNSECURED, USER_KEY, UserInfo
from k8py.apiserver.authz.attributes import Attributes, Decision
from k8py.apiserver.authz.filter import AUTHORIZER, CONSISTENT
from k8py.apiserver.handlers.codec import decode_body
from k8py.apiserver.handlers.context import RequestContext
from k8py.apiserver.handlers.responses import json_response

__all__ = ["ACCESS_REVIEW_HANDLERS"]

Object = dict[str, Any]
GROUP = "authorization.k8s.io"


async def _body(ctx: RequestContext, kind: str) -> Object:
    body = decode_body(await ctx.request.read(), ctx.request.headers.get("Content-Type"))
    if not isinstance(body, dict):
        raise BadRequest(f"the body of the request must be a {kind} object")
    return body


def _reply(kind: str, body: Object, spec: Object, status: Object, namespace: str = "") -> web.StreamResponse:
    meta: Object = {"creationTimestamp": None}
    name = (body.get("metadata") or {}).get("name")
    if name:
        meta["name"] = name
    if namespace:
        meta["namespace"] = namespace
    out = {"kind": kind, "apiVersion": f"{GROUP}/v1", "metadata": meta, "spec": spec, "status": status}
    return json_response(orjson.dumps(out), status=201)


def _attributes(kind: str, user: UserInfo, spec: Object) -> Attributes:
    resource = spec.get("resourceAttributes")
    non_resource = spec.get("nonResourceAttributes")
    if resource is not None and non_resource is not None:  # upstream's ValidateSubjectAccessReviewSpec
        raise Invalid.for_object(kind, "", [Cause("FieldValueInvalid", "Invalid value: \"object\": cannot be specified in "
                                                  "combination with resourceAttributes", "spec.nonResourceAttributes")], GROUP)
    if resource is None and non_resource is None:
        raise Invalid.for_object(kind, "", [Cause("FieldValueInvalid", "Invalid value: \"null\": exactly one of "
                                                  "nonResourceAttributes or resourceAttributes must be specified",
                                                  "spec.resourceAttributes")], GROUP)
    resource = resource or {}
    non_resource = non_resource or {}
    if not resource:
        return Attributes(user=user, verb=str(non_resource.get("verb") or ""), resource_request=False,
                          path=str(non_resource.get("path") or ""))
    return Attributes(user=user, verb=str(resource.get("verb") or ""), api_group=str(resource.get("group") or ""),
                      api_version=str(resource.get("version") or ""), resource=str(resource.get("resource") or ""),
                      subresource=str(resource.get("subresource") or ""), namespace=str(resource.get("namespace") or ""),
                      name=str(resource.get("name") or ""))


async def _decide(ctx: RequestContext, attributes: Attributes) -> Object:
    authorizer = ctx.request.app[AUTHORIZER]
    decision, reason = await authorizer.authorize(attributes)  # type: ignore[attr-defined]
    consistent = ctx.request.app.get(CONSISTENT)
    if decision is Decision.NO_OPINION and consistent is not None:  # judged on every completed RBAC write
        await consistent()  # type: ignore[operator]
        decision, reason = await authorizer.authorize(attributes)  # type: ignore[attr-defined]
    status: Object = {"allowed": decision is Decision.ALLOW}
    if decision is Decision.DENY:
        status["denied"] = True
    if reason:
        status["reason"] = reason
    return status


def _requester(ctx: RequestContext) -> UserInfo:
    return ctx.request.get(USER_KEY) or UNSECURED


async def self_subject_access_review(ctx: RequestContext) -> web.StreamResponse:
    kind = "SelfSubjectAccessReview"
    body = await _body(ctx, kind)
    spec = body.get("spec") or {}
    status = await _decide(ctx, _attributes(kind, _requester(ctx), spec))
    return _reply(kind, body, spec, status)


def _subject(kind: str, spec: Object) -> UserInfo:
    if not spec.get("user") and not spec.get("groups"):
        raise Invalid.for_object(kind, "", [Cause("FieldValueInvalid", 'Invalid value: "": at least one of user or group '
                                                  "must be specified", "spec.user")], GROUP)
    return UserInfo.from_api({"username": spec.get("user") or "", "uid": spec.get("uid") or "",
                              "groups": spec.get("groups") or [], "extra": spec.get("extra") or {}})


async def subject_access_review(ctx: RequestContext) -> web.StreamResponse:
    kind = "SubjectAccessReview"
    body = await _body(ctx, kind)
    spec = body.get("spec") or {}
    status = await _decide(ctx, _attributes(kind, _subject(kind, spec), spec))
    return _reply(kind, body, spec, status)


async def local_subject_access_review(ctx: RequestContext) -> web.StreamResponse:
    kind = "LocalSubjectAccessReview"
    body = await _body(ctx, kind)
    spec = body.get("spec") or {}
    resource = spec.get("resourceAttributes") or {}
    if resource.get("namespace") and resource["namespace"] != ctx.namespace:
        raise BadRequest(f"spec.resourceAttributes.namespace must match namespace: {ctx.namespace}")
    if spec.get("resourceAttributes") is not None:
        spec["resourceAttributes"] = {**resource, "namespace": ctx.namespace}
    status = await _decide(ctx, _attributes(kind, _subject(kind, spec), spec))
    return _reply(kind, body, spec, status, namespace=ctx.namespace)


async def self_subject_rules_review(ctx: RequestContext) -> web.StreamResponse:
    kind = "SelfSubjectRulesReview"
    body = await _body(ctx, kind)
    spec = body.get("spec") or {}
    namespace = spec.get("namespace") or ""
    if not namespace:
        raise BadRequest("no namespace on request")
    consistent = ctx.request.app.get(CONSISTENT)
    if consistent is not None:
        await consistent()  # type: ignore[operator]
    resource, non_resource, incomplete, errors = ctx.request.app[AUTHORIZER].rules_for(  # type: ignore[attr-defined]
        _requester(ctx), namespace)
    status: Object = {"resourceRules": resource, "nonResourceRules": non_resource, "incomplete": incomplete}
    if errors:
        status["evaluationError"] = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    return _reply(kind, body, spec, status)


#: qualified resource -> its create handler (ResourceHandlers.create_handlers)
ACCESS_REVIEW_HANDLERS: dict[str, Callable[[RequestContext], Awaitable[web.StreamResponse]]] = {
    f"selfsubjectaccessreviews.{GROUP}": self_subject_access_review,
    f"subjectaccessreviews.{GROUP}": subject_access_review,
    f"localsubjectaccessreviews.{GROUP}": local_subject_access_review,
    f"selfsubjectrulesreviews.{GROUP}": self_subject_rules_review,
}
