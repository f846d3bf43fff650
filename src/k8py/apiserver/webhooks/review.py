"""AdmissionReview v1: the request a webhook is sent and what its answer means.

:func:`build_review` writes ``admission.k8s.io/v1`` AdmissionReview as
upstream's ``request.CreateV1AdmissionReview`` does (a fresh uid per call;
``kind``/``resource`` as matched, ``requestKind``/``requestResource`` as the
client asked; ``object``/``oldObject`` only when there is one; the
options object of the operation). :func:`parse_response` checks the answer
as upstream's ``VerifyAdmissionResponse``: kind and apiVersion, the uid
echoed, a patch only from a mutating webhook and only ``JSONPatch``.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson

from k8py.apiserver.webhooks.attributes import GroupVersionKind, GroupVersionResource, RequestAttributes, gvk_api, gvr_api, operation_name
from k8py.apiserver.webhooks.client import CallError

__all__ = ["build_review", "parse_response", "ReviewResponse"]

Object = dict[str, Any]

API_VERSION = "admission.k8s.io/v1"


def build_review(attrs: RequestAttributes, *, kind: GroupVersionKind, resource: GroupVersionResource,
                 obj: Object | None, old_obj: Object | None = None, uid: str | None = None) -> Object:
    """``obj``/``old_obj``: the objects as sent (in the matched version); ``old_obj`` defaults to the request's."""
    request: Object = {
        "uid": uid or str(uuid.uuid4()),
        "kind": gvk_api(kind),
        "resource": gvr_api(resource),
    }
    if attrs.subresource:
        request["subResource"] = attrs.subresource
    request["requestKind"] = gvk_api(attrs.kind)
    request["requestResource"] = gvr_api(attrs.resource)
    if attrs.subresource:
        request["requestSubResource"] = attrs.subresource
    if attrs.name:
        request["name"] = attrs.name
    if attrs.namespace:
        request["namespace"] = attrs.namespace
    request["operation"] = operation_name(attrs.operation)
    request["userInfo"] = attrs.user.to_api()
    if obj is not None:
        request["object"] = obj
    old = old_obj if old_obj is not None else attrs.old_object
    if old is not None:
        request["oldObject"] = old
    request["dryRun"] = bool(attrs.dry_run)
    if attrs.options:
        request["options"] = dict(attrs.options)
    return {"kind": "AdmissionReview", "apiVersion": API_VERSION, "request": request}


@dataclass
class ReviewResponse:
    allowed: bool
    status: Object | None = None
    patch: list[Object] | None = None
    warnings: list[str] = field(default_factory=list)
    audit_annotations: dict[str, str] = field(default_factory=dict)


def parse_response(answer: Object, uid: str, *, mutating: bool) -> ReviewResponse:
    if answer.get("apiVersion") != API_VERSION or answer.get("kind") != "AdmissionReview":
        raise CallError(f"expected webhook response of {API_VERSION}, Kind=AdmissionReview, "
                        f"got {answer.get('apiVersion', '')}, Kind={answer.get('kind', '')}")
    response = answer.get("response")
    if not isinstance(response, dict):
        raise CallError("webhook response was absent")
    if response.get("uid") != uid:
        raise CallError(f'expected response.uid="{uid}", got "{response.get("uid", "")}"')
    patch_b64 = response.get("patch")
    patch_type = response.get("patchType")
    patch: list[Object] | None = None
    if patch_b64:
        if not mutating:
            raise CallError("validating webhooks may not return patches")
        if patch_type != "JSONPatch":
            raise CallError(f'expected patchType "JSONPatch", got "{patch_type or ""}"')
        try:
            patch = orjson.loads(base64.b64decode(patch_b64, validate=True))
        except (binascii.Error, orjson.JSONDecodeError) as err:
            raise CallError(f"the response's patch is not base64-encoded JSON: {err}") from None
        if not isinstance(patch, list):
            raise CallError("the response's patch is not a JSON Patch (a list of operations)")
    elif patch_type:
        raise CallError("patchType was set without a patch")
    warnings = [str(w) for w in response.get("warnings") or []]
    annotations = {str(k): str(v) for k, v in (response.get("auditAnnotations") or {}).items()}
    status = response.get("status") if isinstance(response.get("status"), dict) else None
    return ReviewResponse(bool(response.get("allowed")), status, patch, warnings, annotations)
