"""The API Priority and Fairness filter: classify each request, then give it a seat, a queue or a 429.

:class:`FlowControl` reads the FlowSchemas and PriorityLevelConfigurations
from the watch cache (rebuilt when, and only when, either cache changed; the
bootstrap objects of :mod:`.bootstrap` stand in until they are stored), and
for each request:

1. classifies it (once per user, groups, verb, resource and namespace or
   path, while the configuration is unchanged: the answer is kept; and a request whose user,
   User-Agent, method, path and query were seen is looked up whole, as a ``Plan``, with one
   dict access; :mod:`.plans` keeps what is known per kind) (:mod:`.classify`) with the authenticated user; on the
   insecure port, where everyone is ``system:unsecured`` in
   ``system:masters``, with the identity the k8py component named by the
   User-Agent would have over TLS (a kubelet ``system:nodes``, the scheduler,
   the controller manager), anyone else as an ordinary authenticated user —
   so a local flood is not ``exempt``;
2. sets ``X-Kubernetes-PF-FlowSchema-UID`` and
   ``X-Kubernetes-PF-PriorityLevel-UID`` on the response (429s too);
3. ``Exempt`` levels and long-running requests (watch; exec, attach,
   portforward, proxy; pods/log, as upstream's ``BasicLongRunningRequestCheck``)
   run at once; others wait on their level's :class:`~.fair_queuing.QueueSet`.

Seats: the server's total is ``--max-requests-inflight`` plus
``--max-mutating-requests-inflight`` (upstream's rule with APF on; 0 turns
limits off); a Limited level's nominal share is ``ceil(total * shares / sum
of shares)``, and every ``borrowing_period`` seconds :meth:`FlowControl.rebalance`
moves seats from levels that can lend and do not need them to busy ones
(:mod:`.borrowing`). A request takes the seats :mod:`.work_estimate` says (a
LIST over many objects takes several; a mutating request more when many
watchers will receive its event, and it keeps them a few milliseconds after
it has answered). A refusal is 429, ``Retry-After: 1``
and upstream's body ``Too many requests, please try again later.``.
:meth:`FlowControl.run` does the re-sharing and keeps FlowSchemas' ``Dangling``
condition (:mod:`.status`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Awaitable, Callable

from aiohttp import web
from prometheus_client import CollectorRegistry

from k8py.api.errors import StatusError
from k8py.apiserver.authn.user import UNSECURED, USER_KEY, UserInfo
from k8py.apiserver.authz.attributes import Attributes
from k8py.apiserver.authz.request_attributes import request_attributes
from k8py.apiserver.overload.borrowing import SeatDemand, allocate, level_limits
from k8py.apiserver.overload.bootstrap import FLOW_SCHEMAS, GROUP, PRIORITY_LEVELS, VERSION
from k8py.apiserver.overload.classify import ordered
from k8py.apiserver.overload.fair_queuing import QueueSet
from k8py.apiserver.overload.metrics import FlowControlMetrics
from k8py.apiserver.overload.plans import (EXEMPT_FROM_EVENTS, LIST, MUTATING_WORK, Config, Level, Plan,
                                           classify_hit, config_stamp, flow_control_user, long_running, optional_int)
from k8py.apiserver.overload.status import DanglingConditions
from k8py.apiserver.overload.work_estimate import WorkEstimate, exempt_from_watch_events, list_seats, mutating_estimate
from k8py.apiserver.registry import Registry
from k8py.apiserver.store.object_store import ObjectStore
from k8py.apiserver.watch.cacher import Cacher

_READ_ONLY = WorkEstimate()

__all__ = ["FlowControl", "TOO_MANY", "flow_control_user", "FLOW_SCHEMA_UID", "PRIORITY_LEVEL_UID"]

log = logging.getLogger(__name__)

TOO_MANY = "Too many requests, please try again later.\n"
FLOW_SCHEMA_UID = "X-Kubernetes-PF-FlowSchema-UID"
PRIORITY_LEVEL_UID = "X-Kubernetes-PF-PriorityLevel-UID"
_PF_KEY = web.RequestKey("k8py.flow_control", tuple)
_MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_CLASSIFIED_SIZE = 4096

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Object = dict[str, Any]


class FlowControl:
    def __init__(self, registry: Registry, cacher: Cacher, *, max_readonly: int = 400, max_mutating: int = 200,
                 wait_limit: float = 15.0, borrowing_period: float = 10.0, metrics: CollectorRegistry | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.registry, self.cacher = registry, cacher
        self.total = max(0, max_readonly) + max(0, max_mutating) if max_readonly > 0 or max_mutating > 0 else 0
        self.wait_limit = wait_limit
        self.borrowing_period = borrowing_period
        self.clock = clock
        self._config: Config | None = None
        self._levels: dict[str, Level] = {}
        self.metrics = FlowControlMetrics(metrics)
        #: the two watch caches the configuration is read from, once both exist (they are never replaced)
        self._config_caches: tuple[Any, Any] | None = None
        #: request kind ("mutating", "readOnly") -> its inflight gauge series
        self._inflight: dict[str, Any] = {}

    # -- configuration from the watch cache --------------------------------------------------

    def _caches(self) -> tuple[Any, Any] | None:
        if self._config_caches is not None:
            return self._config_caches
        fs = self.registry.get(GROUP, VERSION, "flowschemas")
        pl = self.registry.get(GROUP, VERSION, "prioritylevelconfigurations")
        if fs is None or pl is None:
            return None
        caches = self.cacher.cache_for(fs), self.cacher.cache_for(pl)
        if self.cacher.caches.get(fs.storage_key_resource) is caches[0] and \
                self.cacher.caches.get(pl.storage_key_resource) is caches[1]:
            self._config_caches = caches
        return caches

    def config(self) -> Config:
        caches = self._config_caches or self._caches()
        config = self._config
        if config is not None and caches is not None:  # the common case, by identity: nothing changed
            fs, pl = caches
            fr, pr = fs.ring, pl.ring
            seen = config.seen
            if seen and seen[0] is fs.objects and seen[1] is (fr[-1] if fr else None) \
                    and seen[2] is pl.objects and seen[3] is (pr[-1] if pr else None):
                return config
        stamp = (config_stamp(caches[0]), config_stamp(caches[1])) if caches is not None else ()
        if self._config is not None and self._config.stamp == stamp:
            self._remember(caches)
            return self._config
        schemas = [c.decode() for c in caches[0].objects.values()] if caches is not None else []
        levels_list = [c.decode() for c in caches[1].objects.values()] if caches is not None else []
        if not levels_list:  # before the bootstrap objects are stored
            schemas, levels_list = list(FLOW_SCHEMAS), list(PRIORITY_LEVELS)
        levels = {lv["metadata"]["name"]: lv for lv in levels_list}
        # a schema naming no existing level is dangling: skipped (status.py reports it)
        live = [fs for fs in ordered(schemas)
                if ((fs.get("spec") or {}).get("priorityLevelConfiguration") or {}).get("name") in levels]
        self._config = Config(stamp, live, levels, self._limited_levels(levels))
        self._remember(caches)
        return self._config

    def _remember(self, caches: tuple[Any, Any] | None) -> None:
        """What the next requests compare by identity (see :meth:`config`)."""
        if caches is not None and self._config is not None:
            fr, pr = caches[0].ring, caches[1].ring
            self._config.seen = (caches[0].objects, fr[-1] if fr else None, caches[1].objects, pr[-1] if pr else None)

    def _limited_levels(self, levels: dict[str, Object]) -> dict[str, Level]:
        limited = {name: (lv.get("spec") or {}).get("limited") or {} for name, lv in levels.items()
                   if (lv.get("spec") or {}).get("type") == "Limited"}
        shares_total = sum(int(spec.get("nominalConcurrencyShares", 30) or 0) for spec in limited.values()) or 1
        out: dict[str, Level] = {}
        for name, spec in limited.items():
            limits = level_limits(self.total, int(spec.get("nominalConcurrencyShares", 30) or 0), shares_total,
                                  int(spec.get("lendablePercent") or 0), optional_int(spec.get("borrowingLimitPercent")))
            response = spec.get("limitResponse") or {}
            queuing = response.get("queuing") or {} if response.get("type") == "Queue" else {}
            queues, hand, length = (int(queuing.get("queues", 64)), int(queuing.get("handSize", 8)),
                                    int(queuing.get("queueLengthLimit", 50))) if queuing else (0, 1, 0)
            level = self._levels.get(name)
            if level is None:
                demand = SeatDemand(self.clock)
                qs = QueueSet(name, limits.nominal, queues, hand, length, wait_limit=self.wait_limit, demand=demand)
                level = Level(qs, limits, demand)
                self.metrics.watch_level(qs)
            else:
                seats = level.queues.seats if level.limits == limits else limits.nominal
                level.queues.reconfigure(seats=seats, queues=queues, hand_size=hand, queue_length_limit=length)
                level.limits = limits
            self.metrics.nominal.labels(name).set(limits.nominal)
            self.metrics.lower.labels(name).set(limits.lower)
            self.metrics.upper.labels(name).set(limits.upper(self.total))
            out[name] = level
        self._levels = out
        return out

    def queue_set(self, level: str) -> QueueSet | None:
        found = self.config().limited.get(level)
        return found.queues if found is not None else None

    # -- borrowing ----------------------------------------------------------------------------

    def rebalance(self) -> dict[str, int]:
        """Close a demand period and share the seats out again (see :mod:`.borrowing`); the new limits."""
        levels = self.config().limited
        if not levels or self.total <= 0:
            return {}
        names = sorted(levels)
        items = []
        for name in names:
            level = levels[name]
            smoothed = level.demand.update_smoothed()
            lower, upper = level.limits.lower, level.limits.upper(self.total)
            target = max(float(lower), smoothed)
            items.append((float(lower), float(upper), target))
            self.metrics.target.labels(name).set(target)
            self.metrics.smoothed.labels(name).set(smoothed)
        limits, fair = allocate(sum(levels[n].limits.nominal for n in names), items)
        self.metrics.fair_frac.set(fair if fair != float("inf") else 0)
        for name, seats in zip(names, limits):
            levels[name].queues.set_seats(max(1, seats))
        return {name: levels[name].queues.seats for name in names}

    async def write_conditions(self, store: ObjectStore, *, now: Callable[[], str]) -> None:
        """One pass of the Dangling conditions: the server runs it before it says ready, so a
        server just started writes nothing on its own (the bootstrap FlowSchemas' first status)."""
        await DanglingConditions(self.registry, self.cacher, store, now=now).sync_once()

    async def run(self, store: ObjectStore, *, now: Callable[[], str], status_interval: float = 0.5) -> None:
        """Re-share seats every ``borrowing_period`` s and keep the Dangling conditions, until cancelled."""
        dangling = DanglingConditions(self.registry, self.cacher, store, now=now)
        next_rebalance = self.clock() + self.borrowing_period
        while True:
            try:
                await dangling.sync_once()
            except StatusError as err:
                log.warning("FlowSchema conditions not written", extra={"error": err.message})
            if self.clock() >= next_rebalance:
                self.rebalance()
                next_rebalance = self.clock() + self.borrowing_period
            await asyncio.sleep(max(0.01, min(status_interval, next_rebalance - self.clock())))

    # -- the filter ---------------------------------------------------------------------------

    def install(self, app: web.Application) -> None:
        app.on_response_prepare.append(self._headers)

    async def _headers(self, request: web.Request, response: web.StreamResponse) -> None:
        uids = request.get(_PF_KEY)
        if uids:
            if uids[0]:
                response.headers[FLOW_SCHEMA_UID] = uids[0]
            if uids[1]:
                response.headers[PRIORITY_LEVEL_UID] = uids[1]

    def _object_count(self, a: Attributes) -> int | None:
        definition = self.registry.get(a.api_group, a.api_version, a.resource)
        if definition is None:
            return None
        cache = self.cacher.caches.get(definition.storage_key_resource)
        return None if cache is None else len(cache.objects)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            user = request[USER_KEY]
        except KeyError:
            user = UNSECURED
        config = self.config()
        # everything the plan depends on but the live counts (objects, watchers) and seats
        key = (user.name, user.groups, request.headers.get("User-Agent", ""), request.method, request.path,
               request.query_string)
        planned = config.plans.get(key)
        if planned is None:
            planned = self._plan(config, request, user, key[2])
            if len(config.plans) >= _CLASSIFIED_SIZE:
                config.plans.clear()
            config.plans[key] = planned
        plan, a = planned
        hit = plan.hit
        if hit.schema is not None:  # (None only when the mandatory objects were deleted)
            request[_PF_KEY] = hit.uids
        gauge = plan.inflight
        if plan.immediate:
            gauge.inc()
            try:
                return await handler(request)
            finally:
                gauge.dec()
        limited = plan.limited
        assert limited is not None
        qs = limited.queues
        estimate = _READ_ONLY
        if plan.kind is LIST:
            width = list_seats(a, request.query, self._object_count, max_seats=limited.limits.nominal)
        elif plan.kind is EXEMPT_FROM_EVENTS:
            width = 1
        else:
            cache = self.cacher.caches.get(plan.watch_cache_key) if plan.watch_cache_key is not None else None
            watch_count = 0 if cache is None else cache.interested_watchers(a.namespace, a.name)
            plan.watch_count.observe(watch_count)
            estimate = mutating_estimate(watch_count, max_seats=limited.limits.nominal)
            width = estimate.max_seats
        plan.work.observe(width)
        grant = qs.try_acquire(width, hit.flow)
        if grant is None:
            schema_name = hit.schema_name
            started = self.clock()
            grant, reason = await qs.acquire(hit.flow, width)
            self.metrics.wait.labels(schema_name, hit.level_name, "false" if reason else "true").observe(self.clock() - started)
            if reason:
                self.metrics.rejected.labels(schema_name, hit.level_name, reason).inc()
                return web.Response(status=429, text=TOO_MANY, headers={"Retry-After": "1"})
        plan.dispatched.inc()
        gauge.inc()
        try:
            return await handler(request)
        finally:
            gauge.dec()
            if estimate.additional_latency > 0:
                # the watch events it caused: the seats stay taken a while after the answer went out
                asyncio.get_running_loop().call_later(estimate.additional_latency, qs.release, grant)
            else:
                qs.release(grant)

    def _plan(self, config: Config, request: web.Request, user: UserInfo, user_agent: str) -> tuple[Plan, Attributes]:
        """What a request is to the filter while ``config`` stands: its attributes and the plan of
        its kind (see :class:`Plan`), made once per kind (a bind or a status patch names a new
        pod each time, its plan is the same)."""
        a = request_attributes(flow_control_user(user, user_agent), request.method, request.path, request.query)
        is_long = long_running(request, a.verb, a.subresource)
        shape = (a.user.name, a.user.groups, a.verb, a.resource_request, a.api_group, a.api_version, a.resource,
                 a.subresource, a.namespace, "" if a.resource_request else a.path, request.method, is_long)
        plan = config.shapes.get(shape)
        if plan is None:
            plan = self._new_plan(config, request.method, a, is_long)
            if len(config.shapes) >= _CLASSIFIED_SIZE:
                config.shapes.clear()
            config.shapes[shape] = plan
        return plan, a

    def _new_plan(self, config: Config, method: str, a: Attributes, is_long: bool) -> Plan:
        key = (a.user.name, a.user.groups, a.verb, a.api_group, a.resource, a.subresource, a.namespace,
               "" if a.resource_request else a.path)
        hit = config.classified.get(key)
        if hit is None:  # classify once per kind of request: walking the schemas costs more than the rest
            hit = classify_hit(config, a)
            if len(config.classified) >= _CLASSIFIED_SIZE:
                config.classified.clear()
            config.classified[key] = hit
        kind = "mutating" if method in _MUTATING else "readOnly"
        inflight = self._inflight.get(kind)
        if inflight is None:
            inflight = self._inflight[kind] = self.metrics.inflight.labels(kind)
        immediate = hit.schema is None or hit.limited is None or self.total <= 0 or is_long
        if a.verb == "list":
            work = LIST
        elif exempt_from_watch_events(a):
            work = EXEMPT_FROM_EVENTS
        else:
            work = MUTATING_WORK
        plan = Plan(hit, immediate, work, hit.limited, inflight)
        if not immediate:
            plan.dispatched = hit.metric("dispatched", self.metrics.dispatched, hit.schema_name, hit.level_name)
            plan.work = hit.metric("work", self.metrics.work, hit.schema_name, hit.level_name)
            if work is MUTATING_WORK:
                plan.watch_count = hit.metric("watch_count", self.metrics.watch_count, hit.level_name, hit.schema_name)
                definition = self.registry.get(a.api_group, a.api_version, a.resource)
                plan.watch_cache_key = definition.storage_key_resource if definition is not None else None
        return plan
