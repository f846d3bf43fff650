"""Where a Service reference leads: an address on this machine and the TLS name.

Webhooks (``clientConfig.service``) and aggregated APIServices
(``spec.service``) name a Service and a port; the API server dials it as
``https://<name>.<namespace>.svc:<port>`` and checks the serving certificate
against that name. Kubernetes resolves the name through the Service's
endpoints (``--enable-aggregator-routing``) or its cluster IP; k8py prefers a
ready endpoint (so no kube-proxy is needed and the traffic stays on loopback)
and falls back to the cluster IP. Everything is read from the watch cache:
no store read per request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from k8py.api.errors import ServiceUnavailable
from k8py.apiserver.registry import Registry
from k8py.apiserver.watch.cacher import Cacher

__all__ = ["ServiceResolver", "ServiceTarget"]

Object = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ServiceTarget:
    host: str  # an IP to connect to
    port: int
    server_name: str  # <name>.<namespace>.svc: the name TLS verifies

    def url(self, path: str) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"https://{host}:{self.port}{path}"


class ServiceResolver:
    def __init__(self, registry: Registry, cacher: Cacher) -> None:
        self.registry = registry
        self.cacher = cacher

    def _get(self, group: str, plural: str, namespace: str, name: str) -> Object | None:
        definition = self.registry.get(group, "v1", plural)
        if definition is None:
            return None
        cached = self.cacher.cache_for(definition).objects.get(definition.key(namespace, name))
        return orjson.loads(cached.data) if cached is not None else None

    def resolve(self, namespace: str, name: str, port: int) -> ServiceTarget:
        server_name = f"{name}.{namespace}.svc"
        service = self._get("", "services", namespace, name)
        if service is None:
            raise ServiceUnavailable(f'service "{server_name}" not found')
        spec = service.get("spec") or {}
        if spec.get("type") == "ExternalName":
            return ServiceTarget(spec.get("externalName", ""), port, server_name)
        svc_port = next((p for p in spec.get("ports") or [] if p.get("port") == port), None)
        if svc_port is None:
            raise ServiceUnavailable(f"no service port {port} found for service \"{name}\"")
        endpoint = self._endpoint(namespace, name, svc_port)
        if endpoint is not None:
            return ServiceTarget(endpoint[0], endpoint[1], server_name)
        cluster_ip = spec.get("clusterIP") or ""
        if cluster_ip and cluster_ip != "None":
            return ServiceTarget(cluster_ip, port, server_name)
        raise ServiceUnavailable(f'service "{server_name}" has no endpoints')

    def _endpoint(self, namespace: str, name: str, svc_port: Object) -> tuple[str, int] | None:
        endpoints = self._get("", "endpoints", namespace, name)
        port_name = svc_port.get("name") or ""
        for subset in (endpoints or {}).get("subsets") or []:
            addresses = subset.get("addresses") or []
            ports = subset.get("ports") or []
            port = next((p for p in ports if (p.get("name") or "") == port_name), ports[0] if len(ports) == 1 else None)
            if addresses and port is not None:
                return addresses[0]["ip"], int(port["port"])
        return None
