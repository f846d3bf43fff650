"""Impersonation: ``Impersonate-User/-Group/-Uid/-Extra-*`` (``kubectl --as``), upstream's filter.

Runs after authentication and before authorization. Each thing asked for is
checked with the authorizer as the *authenticated* user, verb
``impersonate``, on:

=====================  ============================  ===========================
header                 resource (API group)          name
=====================  ============================  ===========================
Impersonate-User       ``users`` ("")                the user name
  (a service account)  ``serviceaccounts`` ("")      the account, in its namespace
Impersonate-Group      ``groups`` ("")               each group
Impersonate-Uid        ``uids`` (authentication.k8s.io)  the uid
Impersonate-Extra-K    ``userextras/K`` (authentication.k8s.io)  each value
=====================  ============================  ===========================

The first one refused answers 403 with upstream's Forbidden message. When
all are allowed the request continues as the impersonated user: a
non-anonymous user also gets ``system:authenticated`` (unless
``system:authenticated`` or ``system:unauthenticated`` was asked for),
``system:anonymous`` gets ``system:unauthenticated``, and a service account
with no group asked for gets its fixed groups. Groups, uid or extras without
a user are refused (500, as upstream). The impersonator is kept in
``request[IMPERSONATOR_KEY]`` for audit.
"""

from __future__ import annotations

import urllib.parse
from typing import Awaitable, Callable

from aiohttp import web
from multidict import CIMultiDictProxy

from k8py.api.errors import Forbidden, InternalError
from k8py.apiserver.authn.user import ALL_AUTHENTICATED, ALL_UNAUTHENTICATED, ANONYMOUS_USER, USER_KEY, UserInfo
from k8py.apiserver.authz.attributes import Attributes, Authorizer, Decision

__all__ = ["impersonation_middleware", "impersonation_requests", "forbidden", "IMPERSONATOR_KEY"]

USER_HEADER = "Impersonate-User"
GROUP_HEADER = "Impersonate-Group"
UID_HEADER = "Impersonate-Uid"
EXTRA_PREFIX = "impersonate-extra-"
_SA_PREFIX = "system:serviceaccount:"
_AUTHN_GROUP = "authentication.k8s.io"

#: who really sent an impersonated request
IMPERSONATOR_KEY = web.RequestKey("k8py.impersonator", UserInfo)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _split_service_account(name: str) -> tuple[str, str] | None:
    if not name.startswith(_SA_PREFIX):
        return None
    namespace, sep, account = name[len(_SA_PREFIX):].partition(":")
    if not sep or not namespace or not account or ":" in account:
        return None
    return namespace, account


def impersonation_requests(headers: "CIMultiDictProxy[str]", user: UserInfo) -> list[Attributes]:
    """The ``impersonate`` checks the headers ask for, in upstream's order (empty: none)."""
    out: list[Attributes] = []
    requested_user = headers.get(USER_HEADER, "")
    if requested_user:
        sa = _split_service_account(requested_user)
        if sa is not None:
            out.append(Attributes(user, "impersonate", api_version="v1", resource="serviceaccounts", namespace=sa[0], name=sa[1]))
        else:
            out.append(Attributes(user, "impersonate", api_version="v1", resource="users", name=requested_user))
    others: list[str] = []
    for group in headers.getall(GROUP_HEADER, ()):
        out.append(Attributes(user, "impersonate", api_version="v1", resource="groups", name=group))
        others.append(f"group {group!r}")
    for header in dict.fromkeys(headers.keys()):
        if header.lower().startswith(EXTRA_PREFIX):
            key = urllib.parse.unquote(header[len(EXTRA_PREFIX):].lower())
            for value in headers.getall(header):
                out.append(Attributes(user, "impersonate", api_group=_AUTHN_GROUP, api_version="v1",
                                      resource="userextras", subresource=key, name=value))
                others.append(f"extra {key}={value!r}")
    uid = headers.get(UID_HEADER, "")
    if uid:
        out.append(Attributes(user, "impersonate", api_group=_AUTHN_GROUP, api_version="v1", resource="uids", name=uid))
        others.append(f"uid {uid!r}")
    if others and not requested_user:
        raise InternalError(f"requested [{', '.join(others)}] without impersonating a user: add {USER_HEADER} (kubectl --as)")
    return out


def forbidden(attributes: Attributes, reason: str = "") -> Forbidden:
    """Upstream's Forbidden for a refused request (``responsewriters.Forbidden``)."""
    who = attributes.user.name
    if not attributes.resource_request:
        message = f"User {_q(who)} cannot {attributes.verb} path {_q(attributes.path)}"
    else:
        resource = attributes.resource + (f"/{attributes.subresource}" if attributes.subresource else "")
        scope = f"in the namespace {_q(attributes.namespace)}" if attributes.namespace else "at the cluster scope"
        message = f"User {_q(who)} cannot {attributes.verb} resource {_q(resource)} in API group {_q(attributes.api_group)} {scope}"
    if reason:
        message = f"{message}: {reason}"
    qualified = f"{attributes.resource}.{attributes.api_group}" if attributes.api_group else attributes.resource
    if not qualified:
        text = f"forbidden: {message}"
    elif attributes.name:
        text = f"{qualified} {_q(attributes.name)} is forbidden: {message}"
    else:
        text = f"{qualified} is forbidden: {message}"
    return Forbidden(text, name=attributes.name, group=attributes.api_group, kind=attributes.resource)


def _q(text: str) -> str:
    """Go's %q for the plain strings used here."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _impersonated(requests: list[Attributes], headers_have_groups: bool) -> UserInfo:
    name, uid = "", ""
    groups: list[str] = []
    extra: dict[str, list[str]] = {}
    for a in requests:
        if a.resource == "serviceaccounts":
            name = f"{_SA_PREFIX}{a.namespace}:{a.name}"
            if not headers_have_groups:
                groups = ["system:serviceaccounts", f"system:serviceaccounts:{a.namespace}"]
        elif a.resource == "users":
            name = a.name
        elif a.resource == "groups":
            groups.append(a.name)
        elif a.resource == "userextras":
            extra.setdefault(a.subresource, []).append(a.name)
        elif a.resource == "uids":
            uid = a.name
    if name != ANONYMOUS_USER:
        if ALL_AUTHENTICATED not in groups and ALL_UNAUTHENTICATED not in groups:
            groups.append(ALL_AUTHENTICATED)
    elif ALL_UNAUTHENTICATED not in groups:
        groups.append(ALL_UNAUTHENTICATED)
    return UserInfo(name, uid=uid, groups=tuple(groups), extra={k: tuple(v) for k, v in extra.items()})


def _asks_impersonation(raw_headers: "tuple[tuple[bytes, bytes], ...]") -> bool:
    """Whether any header is an ``Impersonate-*`` one: one pass over the raw header names
    (most requests have none, and this runs for every request)."""
    for name, _ in raw_headers:
        if name and name[0] in _I and name[:12].lower() == b"impersonate-":
            return True
    return False


_I = frozenset(b"Ii")


def impersonation_middleware(get_authorizer: Callable[[], Authorizer]) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
    """The filter; ``get_authorizer`` is read per request, so the authorizer can be set after the app is built."""

    @web.middleware
    async def impersonation(request: web.Request, handler: Handler) -> web.StreamResponse:
        if not _asks_impersonation(request.raw_headers):
            return await handler(request)
        headers = request.headers
        requestor = request[USER_KEY]
        checks = impersonation_requests(headers, requestor)
        if not checks:  # an Impersonate-* header that is none of the above
            return await handler(request)
        authorizer = get_authorizer()
        for attributes in checks:
            decision, reason = await authorizer.authorize(attributes)
            if decision is not Decision.ALLOW:
                raise forbidden(attributes, reason)
        request[IMPERSONATOR_KEY] = requestor
        request[USER_KEY] = _impersonated(checks, GROUP_HEADER in headers)
        return await handler(request)

    return impersonation
