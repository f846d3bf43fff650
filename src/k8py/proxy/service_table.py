"""From Services and EndpointSlices to what a node forwards (upstream
kube-proxy's ``ServicePortMap``, ``EndpointsMap`` and ``CategorizeEndpoints``).

:func:`build_table` is pure: given the Services, the EndpointSlices and this
node's name, it returns one :class:`ServicePort` per (Service, port) that
carries traffic, each with the endpoints a new connection may use:

- cluster traffic (to a cluster IP) uses the **ready** endpoints; when none is
  ready, the **serving and terminating** ones (upstream's terminating
  fallback, so a rolling restart does not drop traffic); under
  ``internalTrafficPolicy: Local`` only those on this node;
- external traffic — to a node port, to one of ``spec.externalIPs``, or to a
  LoadBalancer's ``status.loadBalancer.ingress[].ip`` (unless its ``ipMode``
  is ``Proxy``: the balancer then sends to node ports itself), all at the
  Service's port but the node port — does the same, restricted to this
  node's endpoints under ``externalTrafficPolicy: Local``; a load-balancer
  IP only accepts clients in ``loadBalancerSourceRanges`` when set (or the
  older ``service.beta.kubernetes.io/load-balancer-source-ranges``
  annotation);
- the target port comes from the slice port with the Service port's name
  (slices already resolved named ``targetPort`` values per pod).

A headless Service, an ExternalName Service and one without a cluster IP
have no entry. Endpoints are de-duplicated by address:port (a pod may appear
in two slices while one is being rewritten) and sorted, so two builds of the
same state compare equal and a backend can skip work when nothing changed.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

__all__ = ["Endpoint", "ServicePort", "ServicePortKey", "build_table", "DEFAULT_AFFINITY_TIMEOUT"]

SERVICE_NAME = "kubernetes.io/service-name"
DEFAULT_AFFINITY_TIMEOUT = 10800  # seconds, upstream's ClientIPConfig default


@dataclass(frozen=True, order=True)
class Endpoint:
    ip: str
    port: int
    ready: bool = True
    serving: bool = True
    terminating: bool = False
    node_name: str = ""

    @property
    def address(self) -> tuple[str, int]:
        return (self.ip, self.port)


ServicePortKey = tuple[str, str, str]
"""(namespace, service name, port name)."""


@dataclass(frozen=True)
class ServicePort:
    namespace: str
    name: str
    port_name: str
    protocol: str
    port: int
    cluster_ips: tuple[str, ...]
    node_port: int = 0
    external_ips: tuple[str, ...] = ()
    """``spec.externalIPs`` (IPv4), reached at ``port``."""
    load_balancer_ips: tuple[str, ...] = ()
    """Load-balancer ingress IPs (IPv4), reached at ``port``."""
    source_ranges: tuple[str, ...] = ()
    """``loadBalancerSourceRanges``: the clients the load-balancer IPs accept (empty: any)."""
    session_affinity: bool = False
    affinity_timeout: float = DEFAULT_AFFINITY_TIMEOUT
    cluster_endpoints: tuple[Endpoint, ...] = ()
    """What traffic to the cluster IP may use (see the module docstring)."""
    external_endpoints: tuple[Endpoint, ...] = ()
    """What traffic to the node port may use."""
    all_endpoints: tuple[Endpoint, ...] = field(default=(), compare=True)

    @property
    def key(self) -> ServicePortKey:
        return (self.namespace, self.name, self.port_name)

    @property
    def endpoints_elsewhere(self) -> bool:
        """Some endpoint could serve, on any node: a port a ``Local`` policy leaves
        without endpoints here drops new connections then, rather than refusing them."""
        return any(ep.ready or (ep.serving and ep.terminating) for ep in self.all_endpoints)

    def __str__(self) -> str:
        suffix = f":{self.port_name}" if self.port_name else ""
        return f"{self.namespace}/{self.name}{suffix}"


def _usable(endpoints: Iterable[Endpoint], *, local_only: bool, node_name: str) -> tuple[Endpoint, ...]:
    candidates = [ep for ep in endpoints if not local_only or ep.node_name == node_name]
    ready = [ep for ep in candidates if ep.ready]
    if ready:
        return tuple(ready)
    return tuple(ep for ep in candidates if ep.serving and ep.terminating)


def _slice_endpoints(slices: Iterable[Mapping[str, Any]], port_name: str, protocol: str) -> list[Endpoint]:
    found: dict[tuple[str, int], Endpoint] = {}
    for slc in slices:
        if slc.get("addressType", "IPv4") != "IPv4":
            continue
        number = None
        for port in slc.get("ports") or ():
            if (port.get("name") or "") == port_name and (port.get("protocol") or "TCP") == protocol:
                number = port.get("port")
        if not number:
            continue
        for ep in slc.get("endpoints") or ():
            cond = ep.get("conditions") or {}
            ready = cond.get("ready") is not False  # upstream: nil means ready
            serving = cond.get("serving") if cond.get("serving") is not None else ready
            terminating = bool(cond.get("terminating"))
            for ip in (ep.get("addresses") or [])[:1]:
                endpoint = Endpoint(ip, int(number), ready, bool(serving), terminating, ep.get("nodeName") or "")
                previous = found.get(endpoint.address)
                if previous is None or (endpoint.ready and not previous.ready):
                    found[endpoint.address] = endpoint
    return sorted(found.values())


SOURCE_RANGES_ANNOTATION = "service.beta.kubernetes.io/load-balancer-source-ranges"


def _external_ips(svc: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(ip for ip in (svc.get("spec") or {}).get("externalIPs") or () if isinstance(ip, str) and ip and ":" not in ip)


def _load_balancer_ips(svc: Mapping[str, Any]) -> tuple[str, ...]:
    spec, status = svc.get("spec") or {}, svc.get("status") or {}
    found: list[str] = []
    if spec.get("type") == "LoadBalancer":
        for ingress in (status.get("loadBalancer") or {}).get("ingress") or ():
            ip = ingress.get("ip")
            if ip and ":" not in ip and ingress.get("ipMode") != "Proxy" and ip not in found:
                found.append(ip)
    return tuple(found)


def _source_ranges(svc: Mapping[str, Any]) -> tuple[str, ...]:
    """IPv4 CIDRs of ``spec.loadBalancerSourceRanges``, else of the older annotation (upstream's order)."""
    ranges = (svc.get("spec") or {}).get("loadBalancerSourceRanges") or []
    if not ranges:
        text = ((svc.get("metadata") or {}).get("annotations") or {}).get(SOURCE_RANGES_ANNOTATION) or ""
        ranges = [r.strip() for r in text.split(",") if r.strip()]
    out = []
    for r in ranges:
        try:
            network = ipaddress.ip_network(str(r).strip(), strict=False)
        except ValueError:
            continue  # validation refuses these; an annotation is not validated
        if network.version == 4:
            out.append(str(network))
    return tuple(out)


def build_table(services: Iterable[Mapping[str, Any]], slices: Iterable[Mapping[str, Any]],
                node_name: str) -> dict[ServicePortKey, ServicePort]:
    by_service: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for slc in slices:
        meta = slc.get("metadata") or {}
        name = (meta.get("labels") or {}).get(SERVICE_NAME)
        if name:
            by_service.setdefault((meta.get("namespace", ""), name), []).append(slc)
    table: dict[ServicePortKey, ServicePort] = {}
    for svc in services:
        meta, spec = svc.get("metadata") or {}, svc.get("spec") or {}
        if spec.get("type") == "ExternalName":
            continue
        ips = tuple(ip for ip in (spec.get("clusterIPs") or [spec.get("clusterIP")]) if ip and ip != "None" and ":" not in ip)
        if not ips:
            continue
        namespace, name = meta.get("namespace", ""), meta.get("name", "")
        affinity = spec.get("sessionAffinity") == "ClientIP"
        timeout = ((spec.get("sessionAffinityConfig") or {}).get("clientIP") or {}).get("timeoutSeconds") or DEFAULT_AFFINITY_TIMEOUT
        external_ips, lb_ips, source_ranges = _external_ips(svc), _load_balancer_ips(svc), _source_ranges(svc)
        internal_local = spec.get("internalTrafficPolicy") == "Local"
        external_local = spec.get("externalTrafficPolicy") == "Local"
        for port in spec.get("ports") or ():
            port_name = port.get("name") or ""
            protocol = port.get("protocol") or "TCP"
            endpoints = _slice_endpoints(by_service.get((namespace, name), ()), port_name, protocol)
            entry = ServicePort(
                namespace=namespace, name=name, port_name=port_name, protocol=protocol, port=int(port["port"]),
                cluster_ips=ips, node_port=int(port.get("nodePort") or 0), external_ips=external_ips, load_balancer_ips=lb_ips,
                source_ranges=source_ranges, session_affinity=affinity,
                affinity_timeout=float(timeout),
                cluster_endpoints=_usable(endpoints, local_only=internal_local, node_name=node_name),
                external_endpoints=_usable(endpoints, local_only=external_local, node_name=node_name),
                all_endpoints=tuple(endpoints),
            )
            table[entry.key] = entry
    return table
