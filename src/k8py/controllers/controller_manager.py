"""ControllerManager: build the enabled controllers on one context and run them.

As kube-controller-manager:

1. one REST client, one shared informer factory, one event broadcaster and one
   metrics registry for the whole process;
2. with ``leader_elect``, nothing runs until this process holds the Lease
   ``kube-system/kube-controller-manager``; losing it stops the controllers
   and :meth:`ControllerManager.run` raises (the process should exit, as
   upstream's does, and be restarted);
3. every enabled controller's factory is called with the context (they ask
   for informers and register handlers), then the informers start, then each
   controller's ``run()`` runs as a named task (``controller-<name>``); each
   waits for its own caches before starting workers. This goes in two rounds:
   :data:`FIRST_CONTROLLERS` (what a new Node and its first pod wait for) are
   made, started and listing while the others' credentials are still being
   made (upstream makes each controller's client as it starts it, in turn; a
   new cluster's node waited here for 26 service accounts and tokens, then
   for some 40 lists, before its not-ready taint went); the second round
   waits until the first round's caches have synced (or
   :data:`FIRST_ROUND_SYNC_TIMEOUT`), so that its requests do not compete
   with those lists for this process and the API server. A shared informer a
   second-round controller asks for may be running already: its handlers
   are replayed what the cache holds, as client-go's;
4. ``/healthz`` and ``/metrics`` are served from start-up, leader or not.

A controller whose ``run`` fails is logged and the manager fails with it
(a TaskGroup): a half-working manager is worse than a restarted one.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import socket
import uuid
from dataclasses import dataclass, field
from k8py.client.clock import Clock, RealClock
from k8py.client.event_recorder import EventBroadcaster
from k8py.client.informer_factory import InformerFactory
from k8py.client.leader_election import LeaderElector
from k8py.client.metrics import PrometheusMetricsProvider
from k8py.client.rest import RestClient
from k8py.client.shared_informer import drop_managed_fields
from k8py.controllers.context import ControllerContext, ControllerOptions
from k8py.client.health_server import HealthServer, prometheus_text
from k8py.controllers.registry import Controller, enabled_controllers, load_factory
from k8py.controllers.service_account_credentials import ServiceAccountClients

__all__ = ["ControllerManager", "LeaderElectionConfig", "LEASE_NAMESPACE", "LEASE_NAME"]

logger = logging.getLogger(__name__)

LEASE_NAMESPACE = "kube-system"
LEASE_NAME = "kube-controller-manager"
#: started first (see the module docstring): the node's podCIDR (nodeipam), the
#: lifting of its not-ready taint (nodelifecycle), the namespace's ``default``
#: service account (serviceaccount, without which a pod gets no token volume)
#: and its ``kube-root-ca.crt`` (root-ca-cert-publisher, which that volume projects)
FIRST_CONTROLLERS = ("nodeipam", "nodelifecycle", "serviceaccount", "root-ca-cert-publisher")
#: seconds the second round waits at most for the first round's caches
FIRST_ROUND_SYNC_TIMEOUT = 5.0


@dataclass
class LeaderElectionConfig:
    enabled: bool = False
    identity: str = field(default_factory=lambda: f"{socket.gethostname()}_{uuid.uuid4()}")
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    namespace: str = LEASE_NAMESPACE
    name: str = LEASE_NAME


class ControllerManager:
    """See the module docstring."""

    def __init__(
        self,
        client: RestClient,
        *,
        controllers: str | list[str] = "*",
        options: ControllerOptions | None = None,
        leader_election: LeaderElectionConfig | None = None,
        clock: Clock | None = None,
        bind: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        import prometheus_client

        self.client = client
        self.names = enabled_controllers(controllers)
        self.options = options or ControllerOptions()
        self.leader_election = leader_election or LeaderElectionConfig()
        self.clock: Clock = clock if clock is not None else RealClock()
        self.registry = prometheus_client.CollectorRegistry()
        self.metrics_provider = PrometheusMetricsProvider(self.registry)
        self.broadcaster = EventBroadcaster(client, clock=self.clock)
        self.health = HealthServer(metrics=prometheus_text(self.registry), bind=bind, port=port)
        self.controllers: dict[str, Controller] = {}
        #: per-controller clients (``--use-service-account-credentials``), made when the controllers start
        self.credentials: ServiceAccountClients | None = None
        self.context: ControllerContext | None = None
        self.started = asyncio.Event()
        """Set once every controller's task is running (for tests and callers)."""

    @property
    def port(self) -> int:
        return self.health.port

    async def start_serving(self) -> None:
        """Serve /healthz and /metrics (idempotent; :meth:`run` calls it)."""
        if self.health._runner is None:
            await self.health.start()

    async def run(self) -> None:
        """Run until cancelled (or until the lease is lost, which raises)."""
        await self.start_serving()
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self.broadcaster.run(), name="event-broadcaster")
                if self.leader_election.enabled:
                    group.create_task(self._run_elected(), name="leader-election")
                else:
                    group.create_task(self.run_controllers(), name="controllers")
        finally:
            await self.health.stop()

    async def _run_elected(self) -> None:
        le = self.leader_election
        recorder = self.broadcaster.new_recorder("kube-controller-manager")
        elector = LeaderElector(
            self.client, le.namespace, le.name, le.identity,
            lease_duration=le.lease_duration, renew_deadline=le.renew_deadline, retry_period=le.retry_period,
            on_started_leading=self.run_controllers,
            on_new_leader=lambda who: logger.info("new leader", extra={"leader": who}),
            clock=self.clock, event_recorder=recorder,
        )
        await elector.run()
        raise RuntimeError("leaderelection lost")

    def build(self) -> ControllerContext:
        """Build the context and every enabled controller (no tasks yet)."""
        ctx = self._new_context()
        self._build_controllers(ctx, self.names)
        return ctx

    def _new_context(self) -> ControllerContext:
        informers = InformerFactory(self.client, transform=drop_managed_fields, clock=self.clock)
        self.context = ControllerContext(
            client=self.client, informers=informers, broadcaster=self.broadcaster, clock=self.clock,
            options=self.options, metrics_provider=self.metrics_provider, registry=self.registry,
        )
        return self.context

    def _build_controllers(self, ctx: ControllerContext, names: list[str]) -> list[str]:
        """Build ``names`` on ``ctx``; returns those built."""
        built = []
        for name in names:
            factory = load_factory(name)
            if factory is None:
                continue
            own = ctx
            if self.credentials is not None and self.credentials.client(name) is not self.client:
                own = dataclasses.replace(ctx, client=self.credentials.client(name))  # same informers, its own identity
            controller = factory(own)
            if controller is None:  # its configuration is missing (csrsigning without a CA): not started, as upstream
                continue
            self.controllers[name] = controller
            built.append(name)
            logger.info("built controller", extra={"controller": name})
        return built

    async def run_controllers(self) -> None:
        if self.options.use_service_account_credentials:
            self.credentials = ServiceAccountClients(self.client)
        ctx = self._new_context()
        first = [n for n in self.names if n in FIRST_CONTROLLERS]
        rounds = [first, [n for n in self.names if n not in first]]
        try:
            async with asyncio.TaskGroup() as group:
                for names in rounds:
                    if self.credentials is not None:
                        await self.credentials.prepare(names)
                    for name in self._build_controllers(ctx, names):
                        group.create_task(self._run_one(name, self.controllers[name]), name=f"controller-{name}")
                    ctx.informers.start()
                    if names is first and first:
                        await self._first_round_synced(ctx)
                if self.credentials is not None:
                    group.create_task(self.credentials.run(), name="controller-token-renewal")
                self.started.set()
        finally:
            await ctx.informers.shutdown()
            if self.credentials is not None:
                await self.credentials.close()

    async def _first_round_synced(self, ctx: ControllerContext) -> None:
        """Until the first round's informers have synced, at most
        :data:`FIRST_ROUND_SYNC_TIMEOUT` seconds of real time: an ordering of
        the start, never a condition of it (on a test's fake clock, whose time
        moves only when the test moves it, it is not waited for at all)."""
        if not isinstance(self.clock, RealClock):
            return
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(ctx.informers.wait_for_cache_sync(), FIRST_ROUND_SYNC_TIMEOUT)

    @staticmethod
    async def _run_one(name: str, controller: Controller) -> None:
        try:
            await controller.run()
        except Exception:
            logger.exception("controller failed", extra={"controller": name})
            raise
        else:
            logger.info("controller stopped", extra={"controller": name})

    def running(self) -> list[str]:
        return list(self.controllers)

