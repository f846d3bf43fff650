"""What a request asks to do, read from its path and method (upstream's RequestInfoFactory).

Resource requests are ``/api/<version>/...`` and ``/apis/<group>/<version>/...``
with at least a resource; everything else (``/healthz``, ``/version``,
``/api``, ``/apis/apps``, ``/openapi/v3``, ``/metrics``) is a non-resource
request whose verb is the lower-cased HTTP method and whose path is the
request's path.

For resource requests, as upstream:

- the verb comes from the method — POST create, GET/HEAD get, PUT update,
  PATCH patch, DELETE delete — or from a ``/watch/`` (or ``/proxy/``) segment;
  a get or delete without a name is a list (``watch`` with ``?watch=true``)
  or a deletecollection;
- a list or watch whose fieldSelector pins ``metadata.name=X`` is about ``X``;
- ``/namespaces/<ns>`` and its ``status``/``finalize`` address the namespace
  itself, with namespace = name;
- the subresource is the one path segment after the name (``pods/x/log``,
  ``nodes/n/proxy/anything`` has subresource ``proxy``).
"""

from __future__ import annotations

from typing import Mapping

from k8py.apiserver.authn.user import UserInfo
from k8py.apiserver.authz.attributes import Attributes

__all__ = ["request_attributes"]

_METHOD_VERBS = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
_SPECIAL_VERBS = frozenset({"proxy", "watch"})
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})


def _exact_name(selector: str) -> str:
    """X when a fieldSelector requires ``metadata.name`` to equal X ("" otherwise)."""
    for term in selector.split(","):
        term = term.strip()
        for op in ("==", "="):
            key, sep, value = term.partition(op)
            if sep and key.strip() == "metadata.name" and not key.endswith("!"):
                value = value.strip()
                return value if value and "/" not in value and value not in (".", "..") else ""
    return ""


def _nonresource(user: UserInfo, method: str, path: str) -> Attributes:
    return Attributes(user=user, verb=method.lower(), resource_request=False, path=path)


def request_attributes(user: UserInfo, method: str, path: str, query: Mapping[str, str]) -> Attributes:
    parts = [p for p in path.split("/") if p]
    if len(parts) < 3 or parts[0] not in ("api", "apis"):
        return _nonresource(user, method, path)
    rest = parts[1:]
    group = ""
    if parts[0] == "apis":
        if len(rest) < 3:
            return _nonresource(user, method, path)
        group, rest = rest[0], rest[1:]
    version, rest = rest[0], rest[1:]
    if rest[0] in _SPECIAL_VERBS:
        if len(rest) < 2:
            return _nonresource(user, method, path)
        verb, rest = rest[0], rest[1:]
    else:
        verb = _METHOD_VERBS.get(method.upper(), "")
    namespace = ""
    if rest[0] == "namespaces":
        if len(rest) > 1:
            namespace = rest[1]
            if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
                rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) >= 2 else ""
    subresource = rest[2] if len(rest) >= 3 and verb != "proxy" else ""
    if not name and verb == "get":
        verb = "watch" if query.get("watch", "") in _TRUE else "list"
        name = _exact_name(query.get("fieldSelector", ""))
    if not name and verb == "delete":
        verb = "deletecollection"
    return Attributes(user=user, verb=verb, resource_request=True, api_group=group, api_version=version,
                      resource=resource, subresource=subresource, namespace=namespace, name=name, path=path)
