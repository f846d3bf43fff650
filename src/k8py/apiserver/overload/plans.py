"""What API Priority and Fairness knows about a kind of request, while the configuration stands.

:class:`~.filter.FlowControl` classifies a request once per kind and keeps the answer here:
a :class:`Config` is one reading of the FlowSchemas and PriorityLevelConfigurations (rebuilt
when either watch cache changed), holding the :class:`Level` of each Limited level, the
:class:`Hit` of each classified kind of request (its schema, flow hash and metric series)
and the :class:`Plan` of each kind (whether it runs at once, how its seats are counted).
Everything kept is bounded and dropped with the configuration; seats, object counts and
watcher counts are never kept: they are read live for every request.

Also here, the identity a request is classified as (:func:`flow_control_user`): on the
insecure port everyone is ``system:unsecured`` in ``system:masters``, so a k8py component is
classified as the identity its User-Agent says it would have over TLS, anyone else as an
ordinary authenticated user, so that a local flood is not ``exempt``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from k8py.apiserver.authn.user import ALL_AUTHENTICATED, UNSECURED, UserInfo
from k8py.apiserver.authz.attributes import Attributes
from k8py.apiserver.overload.borrowing import LevelLimits, SeatDemand
from k8py.apiserver.overload.classify import classify, flow_distinguisher
from k8py.apiserver.overload.fair_queuing import QueueSet, flow_hash

__all__ = ["Config", "Hit", "Level", "Plan", "classify_hit", "config_stamp", "flow_control_user", "long_running",
           "optional_int", "LIST", "EXEMPT_FROM_EVENTS", "MUTATING_WORK"]

Object = dict[str, Any]
_LONG_RUNNING_SUBRESOURCES = frozenset({"exec", "attach", "portforward", "proxy", "log"})
#: User-Agent prefix -> the identity that component has over TLS (see the module docstring)
_COMPONENT_AGENTS = (
    (("kubelet/", "k8py-kubelet"), UserInfo("system:node:k8py", groups=("system:nodes", ALL_AUTHENTICATED))),
    (("kube-scheduler/", "k8py-scheduler"), UserInfo("system:kube-scheduler", groups=(ALL_AUTHENTICATED,))),
    (("kube-controller-manager/", "k8py-controller-manager"),
     UserInfo("system:kube-controller-manager", groups=(ALL_AUTHENTICATED,))),
    (("kube-proxy/", "k8py-proxy", "k8py-dns"), UserInfo("system:kube-proxy", groups=(ALL_AUTHENTICATED,))),
)
_LOCAL = UserInfo("system:unsecured", groups=(ALL_AUTHENTICATED,))


def flow_control_user(user: UserInfo, user_agent: str) -> UserInfo:
    """The identity a request is classified as (the insecure port's stand-ins, see the module docstring)."""
    if user is not UNSECURED and user.name != UNSECURED.name:
        return user
    for prefixes, identity in _COMPONENT_AGENTS:
        if user_agent.startswith(prefixes):
            return identity
    return _LOCAL


def long_running(request: web.Request, verb: str, subresource: str) -> bool:
    """Whether a request holds no seat: a watch, or upstream's BasicLongRunningRequestCheck's verbs and subresources."""
    if request.method == "GET" and request.query.get("watch") in ("1", "true", "True"):
        return True
    return verb in ("watch", "proxy") or subresource.split("/", 1)[0] in _LONG_RUNNING_SUBRESOURCES


@dataclass
class Level:
    """A Limited level: its queues, its limits and its seat demand."""

    queues: QueueSet
    limits: LevelLimits
    demand: SeatDemand


@dataclass(slots=True)
class Hit:
    """What one kind of request resolves to while the configuration stands: classified once,
    its metric series bound the first time each is used (a prometheus ``labels()`` call costs
    microseconds; binding none before use keeps /metrics to the series requests touched)."""

    schema: Object | None
    flow: int
    level_name: str = ""
    schema_name: str = ""
    uids: tuple[str, str] = ("", "")
    limited: "Level | None" = None
    series: dict[str, Any] = field(default_factory=dict)

    def metric(self, name: str, family: Any, *labels: str) -> Any:
        child = self.series.get(name)
        if child is None:
            child = self.series[name] = family.labels(*labels)
        return child


LIST, EXEMPT_FROM_EVENTS, MUTATING_WORK = "list", "exempt-from-events", "mutating"


@dataclass(slots=True)
class Plan:
    """One kind of request (its attributes but the name, its method, whether it is long-running)
    while the configuration stands: its classification, whether it runs at once (exempt,
    long-running, no limits), how its seats are counted and its metric series. Kept per
    configuration; a request whose user, User-Agent, method, path and query were seen finds
    its plan and attributes with one dict access. Seats, object and watcher counts stay live
    per request."""

    hit: Hit
    immediate: bool
    kind: str
    limited: "Level | None"
    inflight: Any
    dispatched: Any = None
    work: Any = None
    watch_count: Any = None
    #: the watch cache a mutating request's watchers are counted in (its resource's key)
    watch_cache_key: str | None = None


@dataclass
class Config:
    stamp: tuple[Any, ...]
    schemas: list[Object]
    levels: dict[str, Object]
    limited: dict[str, Level] = field(default_factory=dict)
    #: what a request's classification depends on -> its hit (schema, flow hash, ...); bounded
    classified: dict[tuple[Any, ...], Hit] = field(default_factory=dict)
    #: the configuration caches' object maps and last events it was read at (compared by identity)
    seen: tuple[Any, ...] = ()
    #: (user, groups, User-Agent, method, path, query) -> (its plan, its attributes); bounded
    plans: dict[tuple[Any, ...], tuple[Plan, Attributes]] = field(default_factory=dict)
    #: what a plan depends on (attributes but the name, method, long-running) -> the plan; bounded
    shapes: dict[tuple[Any, ...], Plan] = field(default_factory=dict)


def config_stamp(cache: Any) -> tuple[int, int]:
    return id(cache.objects), cache.ring[-1].rv if cache.ring else -1


def optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def classify_hit(config: Config, a: Attributes) -> Hit:
    """Which FlowSchema and level a kind of request falls to, and its flow (walking the schemas
    costs more than the rest of a plan: done once per kind while the configuration stands)."""
    schema = classify(config.schemas, a)
    if schema is None:
        return Hit(None, 0)
    schema_name = schema["metadata"]["name"]
    level_name = schema["spec"]["priorityLevelConfiguration"]["name"]
    level = config.levels[level_name]
    return Hit(schema, flow_hash(schema_name, flow_distinguisher(schema, a)), level_name, schema_name,
                (schema["metadata"].get("uid", ""), level["metadata"].get("uid", "")),
                config.limited.get(level_name))
