"""``serviceaccounts/NAME/token``: TokenRequest, a bound token for a service account.

POST an ``authentication.k8s.io/v1`` TokenRequest (``kubectl create token
NAME [--duration D] [--audience A] [--bound-object-kind Pod --bound-object-name
P [--bound-object-uid U]]``); the reply (201) is the request with
``spec.audiences`` defaulted to the API audiences and ``status.token`` /
``status.expirationTimestamp`` filled. As upstream's
``registry/core/serviceaccount/storage/token.go``:

- ``expirationSeconds`` defaults to 3600, at least 600 and at most 2^32
  (422 otherwise); above ``--service-account-max-token-expiration`` it is cut
  to it; 3607 (what projected volumes ask) is extended to a year with
  ``warnafter`` when ``--service-account-extend-token-expiration`` is on;
- ``boundObjectRef`` may name a Pod (run by this very service account; its
  node is bound too once it is scheduled), a Secret or a Node, which must
  exist; a uid that is not the object's is a 409;
- nothing is stored: the token is signed with
  ``--service-account-signing-key-file`` (a server without one answers 405).
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from k8py.api.errors import BadRequest, Cause, Conflict, Invalid, MethodNotAllowed, NotFound
from k8py.api.service_account_token import Ref
from k8py.apiserver.authn.service_account import TokenIssuer
from k8py.apiserver.handlers.codec import decode_body
from k8py.apiserver.handlers.context import RequestContext, SubresourceHost
from k8py.apiserver.handlers.responses import json_response
from k8py.apiserver.registry import ResourceDefinition
from k8py.apiserver.store.object_meta import rfc3339

__all__ = ["request_token", "TOKEN_ISSUER"]

Object = dict[str, Any]

#: the API server's token issuer, on its aiohttp Application
TOKEN_ISSUER = web.AppKey("k8py.token_issuer", TokenIssuer)

DEFAULT_EXPIRATION = 3600
MIN_EXPIRATION = 600
MAX_EXPIRATION = 1 << 32

_BINDABLE = {"Pod": "pods", "Secret": "secrets", "Node": "nodes"}


def _validate(name: str, spec: Object) -> None:
    causes = []
    seconds = spec.get("expirationSeconds")
    if not isinstance(seconds, int) or isinstance(seconds, bool):
        causes.append(Cause("FieldValueInvalid", f"Invalid value: {seconds!r}: must be an integer number of seconds", "spec.expirationSeconds"))
    elif seconds < MIN_EXPIRATION:
        causes.append(Cause("FieldValueInvalid", f"Invalid value: {seconds}: may not specify a duration less than 10 minutes", "spec.expirationSeconds"))
    elif seconds > MAX_EXPIRATION:
        causes.append(Cause("FieldValueInvalid", f"Invalid value: {seconds}: may not specify a duration larger than 2^32 seconds", "spec.expirationSeconds"))
    audiences = spec.get("audiences")
    if audiences is not None and (not isinstance(audiences, list) or not all(isinstance(a, str) for a in audiences)):
        causes.append(Cause("FieldValueInvalid", "Invalid value: audiences must be a list of strings", "spec.audiences"))
    if causes:
        raise Invalid.for_object("TokenRequest", name, causes, "authentication.k8s.io")


async def _get(host: SubresourceHost, plural: str, namespace: str, name: str) -> Object | None:
    d = host.registry.get("", "v1", plural)
    assert d is not None
    try:
        return await host.store.get(d, namespace, name)
    except NotFound:
        return None


async def request_token(host: SubresourceHost, ctx: RequestContext, d: ResourceDefinition, verb: str) -> web.StreamResponse:
    if verb != "create":
        raise MethodNotAllowed(f"{ctx.request.method} is not supported on serviceaccounts/token: POST a TokenRequest")
    issuer = ctx.request.app.get(TOKEN_ISSUER)
    if issuer is None or not issuer.enabled:
        raise MethodNotAllowed("this API server issues no tokens: start it with --service-account-signing-key-file "
                               "and --service-account-issuer")
    body = decode_body(await ctx.request.read(), ctx.request.headers.get("Content-Type"))
    if not isinstance(body, dict):
        raise BadRequest("the body of the request must be a TokenRequest object")
    name, namespace = ctx.path.name, ctx.namespace
    spec = dict(body.get("spec") or {})
    spec.setdefault("expirationSeconds", DEFAULT_EXPIRATION)
    if spec["expirationSeconds"] is None:
        spec["expirationSeconds"] = DEFAULT_EXPIRATION
    _validate(name, spec)
    sa = await host.store.get(d, namespace, name)
    sa_ref = Ref(name, sa["metadata"].get("uid", ""))
    pod = secret = node = None
    ref = spec.get("boundObjectRef")
    if ref:
        kind, obj_name, obj_uid = ref.get("kind", ""), ref.get("name", ""), ref.get("uid", "")
        api_version = ref.get("apiVersion") or "v1"
        if kind not in _BINDABLE or api_version != "v1":
            raise BadRequest(f'cannot bind token for serviceaccount "{name}" to object of type {api_version}, Kind={kind}')
        plural = _BINDABLE[kind]
        obj = await _get(host, plural, "" if kind == "Node" else namespace, obj_name)
        if obj is None:
            raise NotFound.for_object(plural, obj_name)
        uid = obj["metadata"].get("uid", "")
        if obj_uid and obj_uid != uid:
            raise Conflict.for_object(kind, obj_name, f"the UID in the bound object reference ({obj_uid}) does not match "
                                      "the UID in record. The object might have been deleted and then recreated")
        bound = Ref(obj_name, uid)
        if kind == "Pod":
            if ((obj.get("spec") or {}).get("serviceAccountName") or "default") != name:
                raise BadRequest(f'cannot bind token for serviceaccount "{name}" to pod running with different serviceaccount name.')
            pod = bound
            node_name = (obj.get("spec") or {}).get("nodeName")
            if node_name:
                node_obj = await _get(host, "nodes", "", node_name)
                node = Ref(node_name, node_obj["metadata"].get("uid", "") if node_obj else "")
        elif kind == "Secret":
            secret = bound
        else:
            node = bound
        spec["boundObjectRef"] = {"kind": kind, "apiVersion": api_version, "name": obj_name, "uid": uid}
    audiences = spec.get("audiences") or list(issuer.config.api_audiences)
    spec["audiences"] = audiences
    token, expires = issuer.issue(namespace=namespace, service_account=sa_ref, audiences=audiences,
                                  expiration_seconds=spec["expirationSeconds"], pod=pod, secret=secret, node=node)
    meta = dict(body.get("metadata") or {})
    meta.update({"name": name, "namespace": namespace, "creationTimestamp": meta.get("creationTimestamp")})
    out = {
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": meta,
        "spec": spec,
        "status": {"token": token, "expirationTimestamp": rfc3339(expires)},
    }
    return json_response(orjson.dumps(out), status=201)
