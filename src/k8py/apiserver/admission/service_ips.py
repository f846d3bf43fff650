"""ClusterIP allocation for Services (upstream's service IP allocator).

A Service of type ClusterIP, NodePort or LoadBalancer created without
``spec.clusterIP`` gets a free address from the service CIDR (default
``10.96.0.0/12``, whose first address belongs to the ``kubernetes`` Service);
``clusterIP: None`` makes a headless Service and is left alone. A requested
address must be inside the range and free (422 otherwise).

Which addresses are taken is read from the Services watch cache. A random
free address is picked, so two concurrent creates collide only with
probability ~1/2^20; upstream serializes allocations through a bitmap in
the store, which k8py can adopt if that ever matters.
"""

from __future__ import annotations

import ipaddress
import random
from typing import Any

import orjson

from k8py.api.errors import Cause, Invalid
from k8py.apiserver.watch.cacher import Cacher
from k8py.apiserver.registry import Registry, ResourceDefinition

__all__ = ["ServiceIPAllocator"]

_SKIP_TYPES = ("ExternalName",)


class ServiceIPAllocator:
    def __init__(self, registry: Registry, cacher: Cacher, cidr: str = "10.96.0.0/12") -> None:
        self.registry = registry
        self.cacher = cacher
        self.network = ipaddress.ip_network(cidr)
        self._rng = random.Random()

    def _used(self) -> set[str]:
        services = self.registry.get("", "v1", "services")
        assert services is not None
        used: set[str] = set()
        for cached in self.cacher.cache_for(services).objects.values():
            spec = orjson.loads(cached.data).get("spec") or {}
            used.update(ip for ip in (spec.get("clusterIPs") or [spec.get("clusterIP")]) if ip)
        return used

    def allocate(self, definition: ResourceDefinition, obj: dict[str, Any]) -> None:
        """Fill ``spec.clusterIP(s)`` of a new Service in place (or check the requested one)."""
        if definition.group != "" or definition.kind != "Service":
            return
        spec = obj.get("spec")
        if not isinstance(spec, dict) or spec.get("type", "ClusterIP") in _SKIP_TYPES:
            return
        requested = spec.get("clusterIP") or ((spec.get("clusterIPs") or [None])[0])
        if requested == "None":
            spec["clusterIPs"] = ["None"]
            spec["clusterIP"] = "None"
            return
        used = self._used()
        name = (obj.get("metadata") or {}).get("name", "")
        if requested:
            try:
                address = ipaddress.ip_address(requested)
            except ValueError:
                return  # validation reports the malformed address
            if address not in self.network:
                raise Invalid.for_object("Service", name, [Cause(
                    "FieldValueInvalid",
                    f'Invalid value: "{requested}": provided IP is not in the valid range. The range of valid IPs is {self.network}',
                    "spec.clusterIPs",
                )])
            if requested in used:
                raise Invalid.for_object("Service", name, [Cause(
                    "FieldValueInvalid",
                    f'Invalid value: "{requested}": provided IP is already allocated',
                    "spec.clusterIPs",
                )])
            spec["clusterIP"] = requested
            spec["clusterIPs"] = [requested]
            return
        size = self.network.num_addresses
        for _ in range(64):
            candidate = str(self.network[self._rng.randrange(2, size - 1)])
            if candidate not in used:
                spec["clusterIP"] = candidate
                spec["clusterIPs"] = [candidate]
                return
        raise Invalid.for_object("Service", name, [Cause("FieldValueInvalid", "Internal error: no free ClusterIP found; the range is full", "spec.clusterIPs")])
