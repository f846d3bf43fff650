"""The cluster's DNS records, built from Services and EndpointSlices (the
Kubernetes DNS-based service discovery specification, as CoreDNS's
``kubernetes`` plugin serves it).

:func:`build_zone` is pure and returns a :class:`Zone` of lower-case,
dot-terminated names:

- ``<svc>.<ns>.svc.<domain>``: A with the cluster IP; for a headless Service
  one A per ready endpoint (all endpoints published as ready count);
  ExternalName: a CNAME to ``spec.externalName``;
- ``<host>.<svc>.<ns>.svc.<domain>`` for each endpoint of a headless Service:
  ``host`` is the endpoint's ``hostname`` (a StatefulSet pod's
  ``hostname``/``subdomain``) or its IP with dashes;
- ``_<port>._<proto>.<svc>.<ns>.svc.<domain>``: SRV for each named port,
  pointing at the Service name (or, headless, at each endpoint's name);
- ``<a-b-c-d>.<ns>.pod.<domain>``: answered from the name alone (CoreDNS's
  ``pods insecure``, what upstream's kube-dns did), see :meth:`Zone.lookup_a`;
- PTR for every cluster IP and every headless endpoint.

The zone knows which names exist at all (:meth:`Zone.exists`), so a query
for a type a name lacks (AAAA in this IPv4 cluster) is an empty NOERROR
answer, and an unknown name in the domain is NXDOMAIN.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

__all__ = ["Zone", "SRV", "build_zone", "reverse_name"]

SERVICE_NAME = "kubernetes.io/service-name"


@dataclass(frozen=True)
class SRV:
    priority: int
    weight: int
    port: int
    target: str


@dataclass
class Zone:
    domain: str
    a: dict[str, list[str]] = field(default_factory=dict)
    srv: dict[str, list[SRV]] = field(default_factory=dict)
    cname: dict[str, str] = field(default_factory=dict)
    ptr: dict[str, str] = field(default_factory=dict)
    names: set[str] = field(default_factory=set)
    namespaces: set[str] = field(default_factory=set)

    def in_domain(self, name: str) -> bool:
        return name == self.domain or name.endswith("." + self.domain)

    def lookup_a(self, name: str) -> list[str]:
        if name in self.a:
            return self.a[name]
        pod = self._pod_ip(name)
        return [pod] if pod else []

    def _pod_ip(self, name: str) -> str | None:
        suffix = ".pod." + self.domain
        if not name.endswith(suffix):
            return None
        labels = name[: -len(suffix)].split(".")
        if len(labels) != 2 or labels[1] not in self.namespaces:
            return None
        try:
            return str(ipaddress.IPv4Address(labels[0].replace("-", ".")))
        except ValueError:
            return None

    def exists(self, name: str) -> bool:
        # names include the empty non-terminals (svc.<domain>, <ns>.svc.<domain>, …)
        return name in self.names or name == self.domain or self._pod_ip(name) is not None


def reverse_name(ip: str) -> str:
    return ipaddress.ip_address(ip).reverse_pointer + "."


def _add(zone: Zone, name: str) -> None:
    """Record ``name`` and its empty non-terminals up to the domain."""
    while name not in zone.names and name != zone.domain and zone.in_domain(name):
        zone.names.add(name)
        name = name.split(".", 1)[1]


def build_zone(services: Iterable[Mapping[str, Any]], slices: Iterable[Mapping[str, Any]],
               *, domain: str = "cluster.local", namespaces: Iterable[str] = ()) -> Zone:
    domain = domain.strip(".").lower() + "."
    zone = Zone(domain=domain, namespaces=set(namespaces))
    by_service: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for slc in slices:
        meta = slc.get("metadata") or {}
        svc = (meta.get("labels") or {}).get(SERVICE_NAME)
        if svc and slc.get("addressType", "IPv4") == "IPv4":
            by_service.setdefault((meta.get("namespace", ""), svc), []).append(slc)
    for service in services:
        meta, spec = service.get("metadata") or {}, service.get("spec") or {}
        ns, name = meta.get("namespace", ""), meta.get("name", "")
        zone.namespaces.add(ns)
        fqdn = f"{name}.{ns}.svc.{domain}".lower()
        _add(zone, fqdn)
        if spec.get("type") == "ExternalName":
            if spec.get("externalName"):
                zone.cname[fqdn] = spec["externalName"].rstrip(".").lower() + "."
            continue
        headless = spec.get("clusterIP") == "None"
        ports = [p for p in spec.get("ports") or () if p.get("name")]
        if not headless:
            ips = [ip for ip in (spec.get("clusterIPs") or [spec.get("clusterIP")]) if ip and ":" not in ip]
            zone.a[fqdn] = ips
            for ip in ips:
                zone.ptr[reverse_name(ip)] = fqdn
            for port in ports:
                srv_name = f"_{port['name']}._{(port.get('protocol') or 'TCP').lower()}.{fqdn}".lower()
                zone.srv[srv_name] = [SRV(0, 100, int(port["port"]), fqdn)]
                _add(zone, srv_name)
            continue
        _headless(zone, fqdn, ports, by_service.get((ns, name), []))
    return zone


def _headless(zone: Zone, fqdn: str, ports: list[Mapping[str, Any]], slices: list[Mapping[str, Any]]) -> None:
    records: dict[str, str] = {}  # endpoint name -> ip
    srv_ports: dict[str, list[tuple[int, str]]] = {}
    for slc in slices:
        slice_ports = {(p.get("name") or "", (p.get("protocol") or "TCP")): p.get("port") for p in slc.get("ports") or ()}
        for ep in slc.get("endpoints") or ():
            if (ep.get("conditions") or {}).get("ready") is False:
                continue
            for ip in (ep.get("addresses") or [])[:1]:
                host = (ep.get("hostname") or ip.replace(".", "-")).lower()
                target = f"{host}.{fqdn}"
                records[target] = ip
                for port in ports:
                    key = (port["name"], port.get("protocol") or "TCP")
                    if slice_ports.get(key):
                        srv_ports.setdefault(f"_{key[0]}._{key[1].lower()}.{fqdn}".lower(), []).append((int(slice_ports[key]), target))
    ips = sorted(set(records.values()), key=lambda ip: ipaddress.IPv4Address(ip))
    zone.a[fqdn] = ips
    for target, ip in records.items():
        zone.a.setdefault(target, []).append(ip)
        _add(zone, target)
        if target.split(".", 1)[0] != ip.replace(".", "-"):
            zone.ptr[reverse_name(ip)] = target
    for srv_name, entries in srv_ports.items():
        weight = max(1, 100 // len(entries))
        zone.srv[srv_name] = [SRV(0, weight, port, target) for port, target in sorted(entries, key=lambda e: e[1])]
        _add(zone, srv_name)
