"""Proxier: Services and EndpointSlices in, one backend sync per change out
(upstream kube-proxy's ``Proxier.syncProxyRules`` loop, minus the rules).

Three informers — Services, EndpointSlices, and this node's Node (for its
addresses, where node ports listen) — mark the state dirty on any event; one
task (``proxy-sync``) rebuilds the table with
:func:`~k8py.proxy.service_table.build_table` whenever it is dirty and hands
it to the backend when it differs from the last one applied. Events that
arrive during a sync are folded into the next one, so a burst costs one or
two syncs, and nothing waits on a timer: the removal of an endpoint reaches
the backend as soon as its slice update arrives. A sync the backend refuses
(``nft`` failed, a cluster IP's port was in use) is not recorded as applied
and is tried again after a backoff (0.5 s doubling to 30 s), without waiting
for another change; the process keeps its caches meanwhile.

After each sync the per-Service health checks (:mod:`.service_health`) are
brought in line: a listener on each ``healthCheckNodePort`` answering with
this node's count of ready local endpoints.

Services labelled ``service.kubernetes.io/service-proxy-name`` belong to
another proxy and are skipped (upstream), which is how the cluster DNS
Service, answered in place by ``k8py dns``, stays out of the table.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from k8py.client.informer_factory import InformerFactory
from k8py.client.resources import ENDPOINT_SLICES, NODES, SERVICES
from k8py.proxy.backend import ProxyBackend, SyncIncomplete
from k8py.proxy.service_health import ServiceHealthServer, health_check_ports, local_ready_endpoints
from k8py.proxy.service_table import ServicePort, ServicePortKey, build_table

__all__ = ["Proxier", "SERVICE_PROXY_NAME"]

logger = logging.getLogger(__name__)

SERVICE_PROXY_NAME = "service.kubernetes.io/service-proxy-name"
#: a failed sync is tried again after this, doubling to the most
SYNC_RETRY_INITIAL, SYNC_RETRY_MAX = 0.5, 30.0


class ProxyMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.sync_duration = Histogram("kubeproxy_sync_proxy_rules_duration_seconds", "SyncProxyRules latency in seconds",
                                       registry=self.registry, buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5))
        self.last_sync = Gauge("kubeproxy_sync_proxy_rules_last_timestamp_seconds", "The last time proxy rules were successfully synced",
                               registry=self.registry)
        self.service_ports = Gauge("k8py_proxy_service_ports", "Service ports in the table", registry=self.registry)
        self.sync_failures = Counter("k8py_proxy_sync_failures", "Syncs the backend refused (each is retried)", registry=self.registry)
        self.connections = Counter("k8py_proxy_connections", "TCP connections relayed to an endpoint", registry=self.registry)


class Proxier:
    def __init__(self, informers: InformerFactory, backend: ProxyBackend, *, node_name: str,
                 node_addresses: Sequence[str] = (), metrics: ProxyMetrics | None = None,
                 health_checks: ServiceHealthServer | None = None) -> None:
        self.backend = backend
        self.health_checks = health_checks
        self.node_name = node_name
        self.extra_addresses = tuple(node_addresses)
        self.metrics = metrics or ProxyMetrics()
        self.services = informers.informer(SERVICES)
        self.slices = informers.informer(ENDPOINT_SLICES)
        self.nodes = informers.informer(NODES, field_selector=f"metadata.name={node_name}")
        self._dirty = asyncio.Event()
        self.synced = asyncio.Event()
        self._pending_since: float | None = None  # the oldest change not yet taken by a sync
        self._syncing_since: float | None = None  # ... and that of the changes the running sync took
        self.table: dict[ServicePortKey, ServicePort] = {}
        self.addresses: tuple[str, ...] = ()
        self.generation = 0
        for informer in (self.services, self.slices, self.nodes):
            informer.add_event_handler(on_add=self._mark, on_update=lambda o, n: self._mark(n), on_delete=self._mark)

    async def _retry_later(self, err: Exception, failures: int) -> None:
        """After a failed sync, the sync is tried again after a backoff (with
        whatever changed meanwhile), as kube-proxy retries a failed sync rather
        than waiting for the next change. The changes a refused sync took count
        as waiting again (``/healthz``); those of an incomplete one, whose
        table is in force but for a few ports, do not."""
        incomplete = isinstance(err, SyncIncomplete)
        if incomplete:
            self.synced.set()  # the rest of the table is in force
        elif self._syncing_since is not None:
            self._pending_since = min(t for t in (self._syncing_since, self._pending_since) if t is not None)
        self._syncing_since = None
        delay = min(SYNC_RETRY_INITIAL * 2 ** (failures - 1), SYNC_RETRY_MAX)
        self.metrics.sync_failures.inc()
        level = logging.WARNING if incomplete else logging.ERROR
        logger.log(level, "proxy rules sync failed; retrying", extra={"error": str(err), "failures": failures, "retry_in_seconds": delay})
        await asyncio.sleep(delay)

    def _mark(self, _obj: Any) -> None:
        if self._pending_since is None:
            self._pending_since = time.time()
        self._dirty.set()

    def waiting_since(self) -> float | None:
        """When the oldest change still waiting for a finished sync arrived (for ``/healthz``)."""
        times = [t for t in (self._syncing_since, self._pending_since) if t is not None]
        return min(times) if times else None

    def node(self) -> dict[str, Any] | None:
        return self.nodes.lister.try_get(None, self.node_name)

    def node_addresses(self) -> tuple[str, ...]:
        node = self.nodes.lister.try_get(None, self.node_name)
        found = list(self.extra_addresses)
        for addr in ((node or {}).get("status") or {}).get("addresses") or ():
            if addr.get("type") in ("InternalIP", "ExternalIP") and addr.get("address") and addr["address"] not in found:
                found.append(addr["address"])
        return tuple(found or ("127.0.0.1",))

    def _our_services(self) -> list[Any]:
        return [s for s in self.services.lister.list() if SERVICE_PROXY_NAME not in ((s.get("metadata") or {}).get("labels") or {})]

    def build(self) -> dict[ServicePortKey, ServicePort]:
        return build_table(self._our_services(), self.slices.lister.list(), self.node_name)

    async def sync_once(self) -> None:
        started = time.perf_counter()
        services = self._our_services()
        table = build_table(services, self.slices.lister.list(), self.node_name)
        addresses = self.node_addresses()
        incomplete: SyncIncomplete | None = None
        if table != self.table or addresses != self.addresses:
            try:
                await self.backend.sync(table, addresses)
            except SyncIncomplete as err:  # the rest is in force: the health checks follow it, and the sync is tried again
                incomplete = err
            else:
                self.table, self.addresses = table, addresses
                self.generation += 1
                self.metrics.service_ports.set(len(table))
        if self.health_checks is not None:
            await self.health_checks.sync(health_check_ports(services), local_ready_endpoints(table, self.node_name), addresses)
        self.metrics.sync_duration.observe(time.perf_counter() - started)
        if incomplete is not None:
            raise incomplete
        self.metrics.last_sync.set(time.time())

    async def run(self) -> None:
        """Sync until cancelled (the informers are started by their factory)."""
        for informer in (self.services, self.slices, self.nodes):
            await informer.wait_for_cache_sync()
        failures = 0
        try:
            while True:
                self._dirty.clear()
                self._syncing_since, self._pending_since = self._pending_since, None
                try:
                    await self.sync_once()
                except Exception as err:  # noqa: BLE001 - the backend refused: nothing is recorded as applied
                    failures += 1
                    await self._retry_later(err, failures)
                    continue
                failures = 0
                self._syncing_since = None
                self.synced.set()
                await self._dirty.wait()
        finally:
            if self.health_checks is not None:
                await self.health_checks.close()
            await self.backend.close()
