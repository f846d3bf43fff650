"""``run_proxy`` and ``run_dns``: the two processes of :mod:`k8py.proxy`, each
running until cancelled.

``run_proxy`` (``k8py proxy``): shared informers, a :class:`Proxier` over the
chosen backend (userspace, or nftables on nodes whose pods have their own
network namespaces: :func:`choose_mode`), and ``/healthz``, ``/readyz`` (ready after the
first sync) and ``/metrics``; with ``healthz_bind`` also kube-proxy's own
``/healthz`` and ``/livez`` (:mod:`.proxier_health`); per-Service health checks
on ``healthCheckNodePort`` (:mod:`.service_health`).

``run_dns`` (``k8py dns``): the zone is rebuilt by one task
(``dns-zone``) whenever a Service, EndpointSlice or Namespace changes, and
queries always read the latest zone. On start it advertises itself as
upstream's cluster DNS does — a ``kube-system/kube-dns`` Service whose
cluster IP is the address the server listens on (so pods' resolv.conf can
name it), with ``k8s-app: kube-dns`` and the
``service.kubernetes.io/service-proxy-name`` label (kube-proxy leaves it
alone: the server answers on that address itself), and its Endpoints. The
Service is created only if missing and the address lies in the Service
range; an existing one is left as it is.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Callable

from prometheus_client import CollectorRegistry

from k8py.api.errors import AlreadyExists, Invalid, NotFound, StatusError
from k8py.client.config import ClientConfig
from k8py.client.informer_factory import InformerFactory
from k8py.client.resources import ENDPOINT_SLICES, ENDPOINTS, NAMESPACES, NODES, SERVICES
from k8py.client.rest import RestClient
from k8py.client.shared_informer import drop_managed_fields
from k8py.proxy.dns_server import DNSAnswerer, DNSServer, host_nameservers
from k8py.proxy.dns_zone import Zone, build_zone
from k8py.proxy.backend import ProxyBackend
from k8py.client.health_server import HealthServer, prometheus_text
from k8py.proxy.proxier import SERVICE_PROXY_NAME, Proxier, ProxyMetrics
from k8py.proxy.proxier_health import ProxierHealthServer
from k8py.proxy.service_health import ServiceHealthServer
from k8py.proxy.userspace import UserspaceBackend

__all__ = ["ProxyOptions", "DNSOptions", "run_proxy", "run_dns", "DEFAULT_DNS_IP"]

logger = logging.getLogger(__name__)

DEFAULT_DNS_IP = "127.192.0.10"


@dataclass
class ProxyOptions:
    node_name: str
    node_addresses: tuple[str, ...] = ()
    bind: str = "127.0.0.1"
    port: int = 0
    #: "userspace", "nftables", or "auto": nftables when this node's kubelet runs pods
    #: in their own network namespaces (its Node carries POD_NETWORK_LABEL=cni)
    mode: str = "auto"
    #: how long "auto" waits for this node's Node object before falling back to userspace
    auto_wait: float = 10.0
    #: the nftables backend's table ("": ``k8py-<node>``)
    nftables_table: str = ""
    #: ``HOST:PORT`` of kube-proxy's own /healthz and /livez (:mod:`.proxier_health`); "" for none
    healthz_bind: str = ""
    healthz_port: int = 0  # where that server listens, once started


POD_NETWORK_LABEL = "k8py.io/pod-network"


async def choose_mode(client: RestClient, options: ProxyOptions) -> str:
    """The backend for ``options.mode`` (see :class:`ProxyOptions`); a forced
    nftables mode that cannot run here is an error that says why."""
    from k8py.proxy.nftables.backend import available

    if options.mode == "nftables":
        why = available()
        if why:
            raise RuntimeError(f"--proxy-mode=nftables: {why}")
        return "nftables"
    if options.mode != "auto":
        return "userspace"
    deadline = asyncio.get_running_loop().time() + options.auto_wait
    while True:
        try:
            node = await client.get(NODES, None, options.node_name)
            labels = (node.get("metadata") or {}).get("labels") or {}
            if labels.get(POD_NETWORK_LABEL) == "cni" and available() is None:
                return "nftables"
            return "userspace"
        except NotFound:
            if asyncio.get_running_loop().time() > deadline:
                logger.warning("proxy mode auto: this node's Node did not appear in time; using userspace "
                               "(pods in their own network namespaces need --proxy-mode=nftables)",
                               extra={"node": options.node_name, "waited_seconds": options.auto_wait})
                return "userspace"
            await asyncio.sleep(0.2)


@dataclass
class DNSOptions:
    bind: str = DEFAULT_DNS_IP
    port: int = 53
    domain: str = "cluster.local"
    upstreams: tuple[str, ...] | None = None
    register_service: bool = True
    health_bind: str = "127.0.0.1"
    health_port: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


async def run_proxy(config: ClientConfig, options: ProxyOptions, *, on_serving: Callable[[str], None] | None = None,
                    on_proxier: Callable[[Proxier], None] | None = None) -> None:
    async with RestClient(config) as client:
        informers = InformerFactory(client, transform=drop_managed_fields)
        metrics = ProxyMetrics()
        mode = await choose_mode(client, options)
        backend: ProxyBackend
        if mode == "nftables":
            from k8py.proxy.nftables.backend import NftablesBackend

            backend = NftablesBackend(options.node_name, options.nftables_table)
        else:
            backend = UserspaceBackend(on_connection=metrics.connections.inc)
        options.mode = mode
        logger.info("proxy backend chosen", extra={"mode": mode, "node": options.node_name})
        health_checks = ServiceHealthServer(healthy=lambda: proxier.synced.is_set())
        proxier = Proxier(informers, backend, node_name=options.node_name,
                          node_addresses=options.node_addresses, metrics=metrics, health_checks=health_checks)
        if on_proxier is not None:
            on_proxier(proxier)
        health = HealthServer(metrics=prometheus_text(metrics.registry), bind=options.bind, port=options.port,
                              ready=lambda: None if proxier.synced.is_set() else "the first sync has not happened yet")
        await health.start()
        proxier_health = None
        if options.healthz_bind:
            proxier_health = ProxierHealthServer(synced=proxier.synced.is_set, waiting_since=proxier.waiting_since, node=proxier.node)
            try:
                await proxier_health.start(options.healthz_bind)
            except BaseException:
                await health.stop()
                raise
            options.healthz_port = proxier_health.port
        if on_serving is not None:
            on_serving(health.url)
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(informers.run(), name="proxy-informers")
                group.create_task(proxier.run(), name="proxy-sync")
        finally:
            if proxier_health is not None:
                await proxier_health.stop()
            await health.stop()


async def _register(client: RestClient, options: DNSOptions, port: int) -> None:
    ports = [{"name": "dns", "port": port, "protocol": "UDP", "targetPort": port},
             {"name": "dns-tcp", "port": port, "protocol": "TCP", "targetPort": port}]
    labels = {"k8s-app": "kube-dns", "kubernetes.io/name": "k8py-dns", SERVICE_PROXY_NAME: "k8py-dns"}
    service = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "kube-dns", "namespace": "kube-system", "labels": labels},
               "spec": {"clusterIP": options.bind, "ports": ports}}
    try:
        await client.create(SERVICES, service, namespace="kube-system")
    except AlreadyExists:
        return
    except Invalid as err:
        logger.warning("not advertising the DNS server as kube-system/kube-dns", extra={"reason": err.message})
        return
    endpoints = {"apiVersion": "v1", "kind": "Endpoints",
                 "metadata": {"name": "kube-dns", "namespace": "kube-system", "labels": labels},
                 "subsets": [{"addresses": [{"ip": options.bind}],
                              "ports": [{"name": p["name"], "port": p["port"], "protocol": p["protocol"]} for p in ports]}]}
    try:
        await client.create(ENDPOINTS, endpoints, namespace="kube-system")
    except (AlreadyExists, NotFound):
        pass


class ZoneKeeper:
    """The latest zone, rebuilt once per burst of changes."""

    def __init__(self, informers: InformerFactory, domain: str) -> None:
        self.domain = domain
        self.services = informers.informer(SERVICES)
        self.slices = informers.informer(ENDPOINT_SLICES)
        self.namespaces = informers.informer(NAMESPACES)
        self.zone = Zone(domain=domain.strip(".") + ".")
        self.synced = asyncio.Event()
        self._dirty = asyncio.Event()
        for informer in (self.services, self.slices, self.namespaces):
            informer.add_event_handler(on_add=self._mark, on_update=lambda o, n: self._mark(n), on_delete=self._mark)

    def _mark(self, _obj: Any) -> None:
        self._dirty.set()

    def rebuild(self) -> None:
        names = [(n.get("metadata") or {}).get("name", "") for n in self.namespaces.lister.list()]
        self.zone = build_zone(self.services.lister.list(), self.slices.lister.list(), domain=self.domain, namespaces=names)

    async def run(self) -> None:
        for informer in (self.services, self.slices, self.namespaces):
            await informer.wait_for_cache_sync()
        while True:
            self._dirty.clear()
            self.rebuild()
            self.synced.set()
            await self._dirty.wait()


async def run_dns(config: ClientConfig, options: DNSOptions, *, on_serving: Callable[[str, DNSServer], None] | None = None) -> None:
    async with RestClient(config) as client:
        informers = InformerFactory(client, transform=drop_managed_fields)
        keeper = ZoneKeeper(informers, options.domain)
        upstreams = options.upstreams if options.upstreams is not None else tuple(host_nameservers(exclude=(options.bind,)))
        answerer = DNSAnswerer(lambda: keeper.zone, upstreams=upstreams)
        server = DNSServer(answerer, bind=options.bind, port=options.port)
        await server.start()
        registry = CollectorRegistry()
        registry.register(_AnswererCollector(answerer))
        health = HealthServer(metrics=prometheus_text(registry), bind=options.health_bind, port=options.health_port,
                              ready=lambda: None if keeper.synced.is_set() else "the zone has not been built yet")
        await health.start()
        try:
            if options.register_service:
                try:
                    await _register(client, options, server.port)
                except StatusError as err:
                    logger.warning("could not advertise kube-system/kube-dns", extra={"reason": str(err)})
            if on_serving is not None:
                on_serving(health.url, server)
            async with asyncio.TaskGroup() as group:
                group.create_task(informers.run(), name="dns-informers")
                group.create_task(keeper.run(), name="dns-zone")
        finally:
            await health.stop()
            await server.stop()


class _AnswererCollector:
    def __init__(self, answerer: DNSAnswerer) -> None:
        self.answerer = answerer

    def collect(self):  # type: ignore[no-untyped-def]
        from prometheus_client.core import CounterMetricFamily

        yield CounterMetricFamily("k8py_dns_requests", "DNS queries received", value=self.answerer.queries)
        yield CounterMetricFamily("k8py_dns_forwarded_requests", "DNS queries forwarded to the host's resolvers",
                                  value=self.answerer.forwarded)
