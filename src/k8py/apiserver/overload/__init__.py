"""Overload protection: bounded in-flight requests, with components kept apart from the crowd.

Upstream's ``WithMaxInFlightLimit`` (``--max-requests-inflight`` 400 for
reads, ``--max-mutating-requests-inflight`` 200 for writes), in the spirit of
API Priority and Fairness: requests are sorted into *priority levels*, and
each level has its own seats, so a client that floods cannot take the seats
the system components need.

- ``exempt``: members of ``system:masters`` with a real identity (a client
  certificate, a token) are never refused, as upstream;
- ``system``: nodes (``system:nodes``), the control-plane identities
  (``system:kube-controller-manager``, ``system:kube-scheduler``,
  ``system:kube-proxy``, ``system:apiserver``, service accounts of
  ``kube-system``), and, on the unauthenticated insecure port where everyone
  is ``system:unsecured``, the k8py components by User-Agent;
- ``workload``: everyone else, the unauthenticated insecure port included
  (every local client shares it, so k8py does not exempt it as upstream's
  old insecure port did).

Each non-exempt level has the full read and write limits to itself. Long-running
requests (watch; exec, attach, portforward, proxy; pods/log) take no seat,
as upstream's ``BasicLongRunningRequestCheck``. A request with no seat free is
answered at once with 429, ``Retry-After: 1`` and upstream's plain-text body
``Too many requests, please try again later.``; client-go and the official
client retry after the delay. The gauge ``apiserver_current_inflight_requests``
(request_kind readOnly / mutating) and the counter
``apiserver_flowcontrol_rejected_requests_total`` (priority_level) are exported.

Request headers and bodies are bounded too: aiohttp refuses header lines
over ``max_field_size`` (8 KiB, 431) and the app refuses bodies over
``MAX_BODY_BYTES`` (3 MiB, 413), as upstream.
"""

from __future__ import annotations

from typing import Awaitable, Callable

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge

from k8py.apiserver.authn.user import SYSTEM_MASTERS, UNSECURED, USER_KEY, UserInfo
from k8py.apiserver.authz.request_attributes import request_attributes

__all__ = ["InflightLimiter", "priority_level", "TOO_MANY"]

TOO_MANY = "Too many requests, please try again later.\n"
_LONG_RUNNING_SUBRESOURCES = frozenset({"exec", "attach", "portforward", "proxy", "log"})
_MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_SYSTEM_USERS = frozenset({"system:kube-controller-manager", "system:kube-scheduler", "system:kube-proxy", "system:apiserver"})
#: User-Agent prefixes of k8py's components (kubelet, scheduler, controller manager, proxy, dns)
_COMPONENT_AGENTS = ("kubelet/", "kube-scheduler/", "kube-controller-manager/", "kube-proxy/", "k8py-kubelet",
                     "k8py-scheduler", "k8py-controller-manager", "k8py-proxy", "k8py-dns")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def priority_level(user: UserInfo, user_agent: str) -> str:
    """``exempt``, ``system`` or ``workload`` (see the module docstring)."""
    if user is UNSECURED or user.name == UNSECURED.name:
        return "system" if user_agent.startswith(_COMPONENT_AGENTS) else "workload"
    if SYSTEM_MASTERS in user.groups:
        return "exempt"
    if "system:nodes" in user.groups or user.name in _SYSTEM_USERS or user.name.startswith("system:serviceaccount:kube-system:"):
        return "system"
    return "workload"


def _long_running(request: web.Request, user: UserInfo) -> bool:
    if request.method == "GET" and request.query.get("watch") in ("1", "true", "True"):
        return True
    a = request_attributes(user, request.method, request.path, request.query)
    return a.verb in ("watch", "proxy") or a.subresource.split("/", 1)[0] in _LONG_RUNNING_SUBRESOURCES


class InflightLimiter:
    def __init__(self, *, max_readonly: int = 400, max_mutating: int = 200,
                 registry: CollectorRegistry | None = None) -> None:
        self.limits = {"readOnly": max_readonly, "mutating": max_mutating}
        self._inflight: dict[tuple[str, str], int] = {}
        self.gauge = Gauge("apiserver_current_inflight_requests", "Requests in flight, by kind (readOnly, mutating).",
                           ["request_kind"], registry=registry)
        self.rejected = Counter("apiserver_flowcontrol_rejected_requests_total",
                                "Requests refused with 429 because their priority level had no seat free.",
                                ["priority_level", "reason"], registry=registry)

    def inflight(self, level: str, kind: str) -> int:
        return self._inflight.get((level, kind), 0)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        limits = self.limits
        kind = "mutating" if request.method in _MUTATING else "readOnly"
        limit = limits[kind]
        if limit <= 0:
            return await handler(request)
        user = request.get(USER_KEY, UNSECURED)
        level = priority_level(user, request.headers.get("User-Agent", ""))
        if level == "exempt" or _long_running(request, user):
            return await handler(request)
        slot = (level, kind)
        current = self._inflight.get(slot, 0)
        if current >= limit:
            self.rejected.labels(level, "concurrency-limit").inc()
            return web.Response(status=429, text=TOO_MANY, headers={"Retry-After": "1"})
        self._inflight[slot] = current + 1
        self.gauge.labels(kind).inc()
        try:
            return await handler(request)
        finally:
            self._inflight[slot] -= 1
            self.gauge.labels(kind).dec()
