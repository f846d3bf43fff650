"""Per-Service health checks on ``healthCheckNodePort`` (upstream kube-proxy's
``healthcheck.ServiceHealthServer``).

A ``type: LoadBalancer`` Service with ``externalTrafficPolicy: Local`` only
sends external traffic to endpoints on the node it reaches, so a cloud load
balancer must know which nodes have one: the API server gives the Service a
``healthCheckNodePort`` and every node's proxy answers HTTP on it, on the
node's addresses, whatever the path:

- ``200`` when this node has at least one **ready** local endpoint of the
  Service (counted once per pod address, over all its ports) and the proxy
  itself has synced, ``503`` otherwise;
- the body upstream writes::

      {
      	"service": {
      		"namespace": "NS",
      		"name": "NAME"
      	},
      	"localEndpoints": N,
      	"serviceProxyHealthy": true
      }

  with ``Content-Type: application/json``, ``X-Content-Type-Options:
  nosniff`` and ``X-Load-Balancing-Endpoint-Weight: N``.

:meth:`ServiceHealthServer.sync` is called after every proxier sync with the
wanted ports and the local counts: it opens listeners for new Services, closes
those of Services gone, and updates counts in place (an answer always reads
the latest). A port that cannot be bound is logged and retried on the next
sync, as upstream.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Iterable, Mapping

from aiohttp import web

from k8py.proxy.service_table import ServicePort

__all__ = ["ServiceHealthServer", "health_check_ports", "local_ready_endpoints"]

logger = logging.getLogger(__name__)

ServiceName = tuple[str, str]  # (namespace, name)


def health_check_ports(services: Iterable[Mapping[str, Any]]) -> dict[ServiceName, int]:
    """``healthCheckNodePort`` of every Service that has one (upstream: set only when needed)."""
    out: dict[ServiceName, int] = {}
    for svc in services:
        meta, spec = svc.get("metadata") or {}, svc.get("spec") or {}
        port = spec.get("healthCheckNodePort")
        if isinstance(port, int) and port > 0 and spec.get("type") == "LoadBalancer":
            out[(meta.get("namespace", ""), meta.get("name", ""))] = port
    return out


def local_ready_endpoints(table: Mapping[Any, ServicePort], node_name: str) -> dict[ServiceName, int]:
    """Per Service, its distinct ready endpoint addresses on ``node_name`` (``LocalReadyEndpoints``)."""
    found: dict[ServiceName, set[str]] = {}
    for entry in table.values():
        for ep in entry.all_endpoints:
            if ep.ready and ep.node_name == node_name:
                found.setdefault((entry.namespace, entry.name), set()).add(ep.ip)
    return {name: len(ips) for name, ips in found.items()}


def body(name: ServiceName, count: int, healthy: bool) -> str:
    return ('{\n\t"service": {\n'
            f'\t\t"namespace": "{name[0]}",\n\t\t"name": "{name[1]}"\n\t}},\n'
            f'\t"localEndpoints": {count},\n\t"serviceProxyHealthy": {"true" if healthy else "false"}\n}}')


class ServiceHealthServer:
    def __init__(self, *, healthy: Callable[[], bool] = lambda: True) -> None:
        self._healthy = healthy
        self._by_port: dict[int, ServiceName] = {}
        self._counts: dict[ServiceName, int] = {}
        self._sites: dict[ServiceName, tuple[int, tuple[str, ...], list[web.TCPSite]]] = {}
        self._runner: web.AppRunner | None = None

    async def _ensure_runner(self) -> web.AppRunner:
        if self._runner is None:
            app = web.Application()
            app.router.add_route("*", "/{tail:.*}", self._answer)
            self._runner = web.AppRunner(app, access_log=None)
            await self._runner.setup()
        return self._runner

    async def _answer(self, request: web.Request) -> web.Response:
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        name = self._by_port.get(sockname[1]) if sockname else None
        if name is None:  # closed meanwhile
            return web.Response(status=404)
        count, healthy = self._counts.get(name, 0), self._healthy()
        headers = {"X-Content-Type-Options": "nosniff", "X-Load-Balancing-Endpoint-Weight": str(count)}
        return web.Response(status=200 if count and healthy else 503, text=body(name, count, healthy),
                            content_type="application/json", headers=headers)

    @property
    def serving(self) -> dict[ServiceName, int]:
        """The Services with an open listener, and their ports."""
        return {name: port for name, (port, _, _) in self._sites.items()}

    async def sync(self, ports: Mapping[ServiceName, int], counts: Mapping[ServiceName, int], addresses: tuple[str, ...]) -> None:
        self._counts = dict(counts)
        for name in [n for n, (port, addrs, _) in self._sites.items() if ports.get(n) != port or addrs != addresses]:
            await self._close(name)
        for name, port in ports.items():
            if name in self._sites:
                continue
            runner = await self._ensure_runner()
            sites: list[web.TCPSite] = []
            try:
                for address in addresses:
                    site = web.TCPSite(runner, address, port, reuse_address=True)
                    await site.start()
                    sites.append(site)
            except OSError as err:
                logger.warning("cannot open the service health check port; retrying on the next sync",
                               extra={"service": f"{name[0]}/{name[1]}", "port": port, "error": str(err)})
                for site in sites:
                    await site.stop()
                continue
            self._sites[name] = (port, addresses, sites)
            self._by_port[port] = name

    async def _close(self, name: ServiceName) -> None:
        port, _, sites = self._sites.pop(name)
        if self._by_port.get(port) == name:
            del self._by_port[port]
        for site in sites:
            await site.stop()

    async def close(self) -> None:
        for name in list(self._sites):
            await self._close(name)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
