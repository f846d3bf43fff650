"""Cluster IPs and node ports for Services (upstream's service IP and node
port allocators, with the repair loop).

On create (:meth:`ServiceAllocator.allocate`, after defaulting and before
validation):

- a Service of type ClusterIP, NodePort or LoadBalancer gets a cluster IP
  from ``--service-cluster-ip-range`` (default ``127.192.0.0/12``; the
  network and broadcast addresses are never handed out, and the first usable
  one is the ``kubernetes`` Service's); ``clusterIP: None`` is headless and
  left alone; a requested address must be in the range and free (422 with
  upstream's message otherwise);
- each port of a NodePort or LoadBalancer Service gets a node port from
  ``--service-node-port-range`` (30000-32767), a requested one checked the
  same way; two ports of one Service with the same number share it; a
  LoadBalancer with ``allocateLoadBalancerNodePorts: false`` gets only the
  node ports it asks for; a LoadBalancer with ``externalTrafficPolicy: Local`` also gets its
  ``healthCheckNodePort`` from that range;
- the claims are made in the store (:mod:`.range_claims`) so that no
  address or port is ever handed out twice — across concurrent creates,
  several API servers on one store, or restarts. The caller gets back a
  rollback that frees them if the Service is then not stored.

Updates (:meth:`allocate_update`, :meth:`release_unused`): a change to
NodePort or LoadBalancer allocates node ports for ports without one, a change
from ExternalName allocates a cluster IP; a change away from them drops the
fields left as they were and frees what they held (upstream's
``dropTypeDependentFields``).

Releases follow the store, not a request path: :meth:`run` watches Service
keys and frees the claims of every deleted Service (by uid, so a Service
re-created under the same name keeps its own), however it was deleted. What
falls through the cracks (a crash between the claim and the Service's write,
deletions missed while the watch was down) is put right by the repair loop,
:mod:`.service_repair`.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from typing import Any, Awaitable, Callable

import orjson

from k8py.api.errors import Cause, Invalid
from k8py.apiserver.admission.range_claims import RangeClaims
from k8py.apiserver.registry import Registry, ResourceDefinition
from k8py.apiserver.watch.cacher import Cacher
from k8py.storage import Storage
from k8py.storage.interface import EventType, StorageError

__all__ = ["ServiceAllocator", "IP_PREFIX", "NODE_PORT_PREFIX", "parse_port_range", "needs_health_check"]

log = logging.getLogger(__name__)

IP_PREFIX = "/registry/ranges/serviceips"
NODE_PORT_PREFIX = "/registry/ranges/servicenodeports"
_NO_CLUSTER_IP = ("ExternalName",)
_NODE_PORT_TYPES = ("NodePort", "LoadBalancer")

Rollback = Callable[[], Awaitable[None]]


def parse_port_range(text: str) -> tuple[int, int]:
    low, _, high = text.partition("-")
    return int(low), int(high or low)


def _owner(obj: dict[str, Any]) -> dict[str, str]:
    meta = obj.get("metadata") or {}
    return {"namespace": meta.get("namespace", ""), "name": meta.get("name", ""), "uid": meta.get("uid", "")}


def _invalid(name: str, field: str, message: str) -> Invalid:
    return Invalid.for_object("Service", name, [Cause("FieldValueInvalid", message, field)])


class ServiceAllocator:
    def __init__(self, registry: Registry, cacher: Cacher, storage: Storage, cidr: str = "127.192.0.0/12",
                 node_port_range: str = "30000-32767") -> None:
        self.registry = registry
        self.cacher = cacher
        self.storage = storage
        self.network = ipaddress.ip_network(cidr)
        self.node_ports = parse_port_range(node_port_range)
        self.ips = RangeClaims(storage, IP_PREFIX)
        self.ports = RangeClaims(storage, NODE_PORT_PREFIX)
        self._ip_candidates: list[str] | None = None

    @property
    def _services(self) -> ResourceDefinition:
        definition = self.registry.get("", "v1", "services")
        assert definition is not None
        return definition

    def _cached_specs(self) -> list[dict[str, Any]]:
        return [(orjson.loads(c.data).get("spec") or {}) for c in self.cacher.cache_for(self._services).objects.values()]

    def _candidates(self) -> list[str]:
        if self._ip_candidates is None:
            size = self.network.num_addresses
            # hosts only; a very large range is sampled lazily through the index
            self._ip_candidates = _AddressRange(self.network) if size > 4096 else [str(ip) for ip in self.network.hosts()]  # type: ignore[assignment]
        return self._ip_candidates  # type: ignore[return-value]

    async def allocate(self, definition: ResourceDefinition, obj: dict[str, Any], *, dry_run: bool = False) -> Rollback | None:
        """Fill ``spec.clusterIP(s)`` and node ports of a new Service in place."""
        if definition.group != "" or definition.kind != "Service":
            return None
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return None
        claims: list[tuple[RangeClaims, str]] = []
        owner = _owner(obj)

        async def rollback() -> None:
            for claims_of, item in claims:
                await claims_of.release(item, owner["uid"])

        try:
            if spec.get("type", "ClusterIP") not in _NO_CLUSTER_IP:
                ip = await self._allocate_ip(obj, spec, owner, dry_run)
                if ip:
                    claims.append((self.ips, ip))
            if spec.get("type") in _NODE_PORT_TYPES:
                claims.extend((self.ports, p) for p in await self._allocate_node_ports(obj, spec, owner, dry_run, {}))
            if needs_health_check(spec):
                taken = [str(p.get("nodePort")) for p in spec.get("ports") or [] if isinstance(p, dict)]
                claims.extend((self.ports, p) for p in await self._allocate_health_check(spec, owner, dry_run, set(taken)))
        except BaseException:
            await rollback()
            raise
        return rollback

    def applies(self, definition: ResourceDefinition) -> bool:
        return definition.group == "" and definition.kind == "Service"

    async def allocate_update(self, definition: ResourceDefinition, old: dict[str, Any], new: dict[str, Any], *,
                              dry_run: bool = False) -> None:
        """A type change on update, as upstream: fields the new type cannot have are
        dropped when the request left them as they were (``dropTypeDependentFields``),
        and what the new type needs is allocated."""
        spec, old_spec = new.get("spec"), old.get("spec") or {}
        if not isinstance(spec, dict):
            return
        new_type, old_type = spec.get("type") or "ClusterIP", old_spec.get("type") or "ClusterIP"
        if new_type not in _NODE_PORT_TYPES and old_type in _NODE_PORT_TYPES:
            before = [p.get("nodePort") for p in old_spec.get("ports") or [] if isinstance(p, dict)]
            for port in spec.get("ports") or []:
                if isinstance(port, dict) and port.get("nodePort") in before:
                    port.pop("nodePort", None)
            for field in ("externalTrafficPolicy", "healthCheckNodePort", "allocateLoadBalancerNodePorts"):
                if field in spec and spec.get(field) == old_spec.get(field):
                    spec.pop(field)
        if new_type == "ExternalName" and old_type != "ExternalName":
            if spec.get("clusterIP") == old_spec.get("clusterIP"):
                spec.pop("clusterIP", None)
            if spec.get("clusterIPs") == old_spec.get("clusterIPs"):
                spec.pop("clusterIPs", None)
        owner = _owner(old)
        if old_type == "ExternalName" and new_type != "ExternalName":
            await self._allocate_ip(new, spec, owner, dry_run)
        if new_type in _NODE_PORT_TYPES:
            mine = {int(p["nodePort"]): True for p in old_spec.get("ports") or [] if isinstance(p, dict) and p.get("nodePort")}
            await self._allocate_node_ports(new, spec, owner, dry_run, mine)
        # upstream's updateHealthCheckNodePort: kept while needed, allocated when it becomes
        # needed, dropped (when the request left it as it was) when it no longer is
        if needs_health_check(spec):
            if not spec.get("healthCheckNodePort") and old_spec.get("healthCheckNodePort") and needs_health_check(old_spec):
                spec["healthCheckNodePort"] = old_spec["healthCheckNodePort"]
            if spec.get("healthCheckNodePort") != old_spec.get("healthCheckNodePort") or not spec.get("healthCheckNodePort"):
                taken = {str(p.get("nodePort")) for p in spec.get("ports") or [] if isinstance(p, dict)}
                await self._allocate_health_check(spec, owner, dry_run, taken)
        elif spec.get("healthCheckNodePort") and spec.get("healthCheckNodePort") == old_spec.get("healthCheckNodePort"):
            spec.pop("healthCheckNodePort")

    async def release_unused(self, old: dict[str, Any], new: dict[str, Any], stored: dict[str, Any] | None) -> None:
        uid = (old.get("metadata") or {}).get("uid", "")
        kept_ips, kept_ports = _held(stored) if stored is not None else (set(), set())
        new_ips, new_ports = _held(new)
        old_ips, old_ports = _held(old)
        if stored is None:  # the update failed: what it claimed goes, what the object had stays
            kept_ips, kept_ports = old_ips, old_ports
        for ip in (new_ips | old_ips) - kept_ips:
            await self.ips.release(ip, uid)
        for port in (new_ports | old_ports) - kept_ports:
            await self.ports.release(port, uid)

    async def _allocate_ip(self, obj: dict[str, Any], spec: dict[str, Any], owner: dict[str, str], dry_run: bool) -> str | None:
        name = owner["name"]
        requested = spec.get("clusterIP") or ((spec.get("clusterIPs") or [None])[0])
        if requested == "None":
            spec["clusterIPs"] = ["None"]
            spec["clusterIP"] = "None"
            return None
        if requested:
            try:
                address = ipaddress.ip_address(requested)
            except ValueError:
                return None  # validation reports the malformed address
            if address not in self.network or address in (self.network.network_address, self.network.broadcast_address):
                raise _invalid(name, "spec.clusterIPs", f'Invalid value: []string{{"{requested}"}}: failed to allocate IP {requested}: '
                               f"the provided IP ({requested}) is not in the valid range. The range of valid IPs is {self.network}")
            if dry_run:
                taken = any(requested in (s.get("clusterIPs") or [s.get("clusterIP")]) for s in self._cached_specs())
            else:
                taken = not await self.ips.claim(requested, owner)
            if taken:
                raise _invalid(name, "spec.clusterIPs", f'Invalid value: []string{{"{requested}"}}: failed to allocate IP {requested}: '
                               "provided IP is already allocated")
            spec["clusterIP"] = requested
            spec["clusterIPs"] = [requested]
            return None if dry_run else requested
        used = {ip for s in self._cached_specs() for ip in (s.get("clusterIPs") or [s.get("clusterIP")]) if ip}
        if dry_run:
            ip = next((c for c in _sample(self._candidates(), 64) if c not in used), None)
        else:
            ip = await self.ips.claim_any(self._candidates(), owner, skip=used)
        if ip is None:
            raise _invalid(name, "spec.clusterIPs", f"Internal error: failed to allocate a serviceIP: range is full ({self.network})")
        spec["clusterIP"] = ip
        spec["clusterIPs"] = [ip]
        return None if dry_run else ip

    async def _allocate_node_ports(self, obj: dict[str, Any], spec: dict[str, Any], owner: dict[str, str], dry_run: bool,
                                   already: dict[int, bool]) -> list[str]:
        low, high = self.node_ports
        claimed: list[str] = []
        assigned: dict[tuple[int, str], int] = {}
        for i, port in enumerate(spec.get("ports") or []):
            if not isinstance(port, dict):
                continue
            requested = port.get("nodePort")
            if requested:
                if not isinstance(requested, int):
                    continue  # validation reports it
                if requested in already or requested in claimed_numbers(claimed):
                    continue
                if not low <= requested <= high:
                    raise _invalid(owner["name"], f"spec.ports[{i}].nodePort",
                                   f"Invalid value: {requested}: provided port is not in the valid range. The range of valid ports is {low}-{high}")
                if not dry_run and not await self.ports.claim(str(requested), owner):
                    raise _invalid(owner["name"], f"spec.ports[{i}].nodePort",
                                   f"Invalid value: {requested}: provided port is already allocated")
                claimed.append(str(requested))
                continue
            if spec.get("type") == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is False:
                continue  # requested node ports are honoured, none is picked (upstream's shouldAllocateNodePorts)
            same = assigned.get((int(port.get("port") or 0), "any"))
            if same is not None:
                port["nodePort"] = same
                continue
            used = {int(p["nodePort"]) for s in self._cached_specs() for p in s.get("ports") or [] if isinstance(p, dict) and p.get("nodePort")}
            if dry_run:
                number = next((n for n in range(low, high + 1) if n not in used), None)
                got = str(number) if number is not None else None
            else:
                got = await self.ports.claim_any([str(n) for n in range(low, high + 1)], owner, skip={str(u) for u in used})
            if got is None:
                raise _invalid(owner["name"], f"spec.ports[{i}].nodePort", "Internal error: failed to allocate a nodePort: range is full")
            port["nodePort"] = int(got)
            assigned[(int(port.get("port") or 0), "any")] = int(got)
            claimed.append(got)
        return [] if dry_run else claimed

    async def _allocate_health_check(self, spec: dict[str, Any], owner: dict[str, str], dry_run: bool,
                                     node_ports: set[str]) -> list[str]:
        """``spec.healthCheckNodePort`` of a LoadBalancer with ``externalTrafficPolicy: Local``,
        from the node port range (a requested one checked as a node port is)."""
        low, high = self.node_ports
        requested = spec.get("healthCheckNodePort")
        field = "spec.healthCheckNodePort"
        if requested:
            if not isinstance(requested, int):
                return []  # validation reports it
            if not low <= requested <= high:
                raise _invalid(owner["name"], field, f"Invalid value: {requested}: provided port is not in the valid range. "
                               f"The range of valid ports is {low}-{high}")
            if str(requested) in node_ports or (not dry_run and not await self.ports.claim(str(requested), owner)):
                raise _invalid(owner["name"], field, f"Invalid value: {requested}: provided port is already allocated")
            return [] if dry_run else [str(requested)]
        used = {str(p["nodePort"]) for s in self._cached_specs() for p in s.get("ports") or [] if isinstance(p, dict) and p.get("nodePort")}
        used |= {str(s["healthCheckNodePort"]) for s in self._cached_specs() if s.get("healthCheckNodePort")} | node_ports
        if dry_run:
            got = next((str(n) for n in range(low, high + 1) if str(n) not in used), None)
        else:
            got = await self.ports.claim_any([str(n) for n in range(low, high + 1)], owner, skip=used)
        if got is None:
            raise _invalid(owner["name"], field, "Internal error: failed to allocate a nodePort: range is full")
        spec["healthCheckNodePort"] = int(got)
        return [] if dry_run else [got]

    async def release(self, service: dict[str, Any]) -> None:
        spec = service.get("spec") or {}
        uid = (service.get("metadata") or {}).get("uid", "")
        for ip in spec.get("clusterIPs") or [spec.get("clusterIP")]:
            if ip and ip != "None":
                await self.ips.release(ip, uid)
        for port in spec.get("ports") or []:
            if isinstance(port, dict) and port.get("nodePort"):
                await self.ports.release(str(port["nodePort"]), uid)
        if spec.get("healthCheckNodePort"):
            await self.ports.release(str(spec["healthCheckNodePort"]), uid)

    async def run(self, after: int) -> None:
        """Free the claims of deleted Services, from the store's watch, until cancelled."""
        prefix = self._services.key_prefix
        while True:
            try:
                async for batch in self.storage.watch(prefix, after=after):
                    for event in batch.events:
                        if event.type is EventType.DELETE:
                            await self.release(orjson.loads(event.kv.value))
                    after = batch.revision
                return
            except asyncio.CancelledError:
                raise
            except StorageError as err:
                # deletions missed meanwhile leave claims with no Service: the repair
                # loop (:mod:`.service_repair`) frees them
                log.warning("service allocation watch failed; resuming", extra={"error": str(err)})
                await asyncio.sleep(1.0)
                after = await self.storage.current_revision()


def _held(service: dict[str, Any]) -> tuple[set[str], set[str]]:
    spec = service.get("spec") or {}
    ips = {ip for ip in (spec.get("clusterIPs") or [spec.get("clusterIP")]) if ip and ip != "None"}
    ports = {str(p["nodePort"]) for p in spec.get("ports") or [] if isinstance(p, dict) and p.get("nodePort")}
    if spec.get("healthCheckNodePort"):
        ports.add(str(spec["healthCheckNodePort"]))
    return ips, ports


def needs_health_check(spec: dict[str, Any]) -> bool:
    """Upstream's NeedsHealthCheck: a LoadBalancer that keeps traffic on the node it reaches."""
    return spec.get("type") == "LoadBalancer" and spec.get("externalTrafficPolicy") == "Local"


def claimed_numbers(claimed: list[str]) -> set[int]:
    return {int(c) for c in claimed}


def _sample(candidates: Any, n: int) -> list[str]:
    import random

    size = len(candidates)
    return [candidates[random.randrange(size)] for _ in range(min(n, size))]


class _AddressRange:
    """The usable addresses of a large network as a lazy sequence."""

    def __init__(self, network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> None:
        self.network = network

    def __len__(self) -> int:
        return self.network.num_addresses - 2

    def __getitem__(self, i: int) -> str:
        return str(self.network[i + 1])
