"""The ``kubernetes`` Service's Endpoints and EndpointSlice: every live API
server (upstream's lease endpoint reconciler).

Each API server holds a ``coordination.k8s.io`` Lease in ``kube-system``
named ``apiserver-<hash of its address:port>``, labelled
``apiserver.kubernetes.io/identity: kube-apiserver``, renewed every
``interval`` seconds and valid for ``lease_duration``; its address and port
are in the Lease's annotations. After each renewal the server writes the
``default/kubernetes`` Endpoints (labelled
``endpointslice.kubernetes.io/skip-mirror: "true"``, since the server writes
the slice too) and the ``kubernetes`` EndpointSlice, listing the addresses
of every unexpired Lease — so a server that stops renewing drops out within
``lease_duration`` and a new one appears at its first renewal. On a clean
stop a server deletes its Lease and rewrites the objects without itself.

Every server computes the same objects from the same Leases, and writes
only when they differ, so several servers agree without electing a leader.
The Lease and objects are read from the store (not the watch cache) right
before each write, and writes are guarded by resourceVersion.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from datetime import datetime, timezone
from typing import Any, Callable

from k8py.api.errors import AlreadyExists, Conflict, NotFound, StatusError
from k8py.apiserver.registry import Registry
from k8py.apiserver.store.object_store import ObjectStore, load_object

__all__ = ["EndpointReconciler", "IDENTITY_LABEL"]

log = logging.getLogger(__name__)

IDENTITY_LABEL = "apiserver.kubernetes.io/identity"
ADDRESS_ANNOTATION = "k8py.io/apiserver-address"
PORT_ANNOTATION = "k8py.io/apiserver-port"


def _micro_time(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_time(text: str) -> float:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except (ValueError, AttributeError):
        return 0.0


class EndpointReconciler:
    def __init__(self, registry: Registry, store: ObjectStore, *, address: str, port: int, interval: float = 10.0,
                 lease_duration: float = 15.0, clock: Callable[[], float] = time.time) -> None:
        self.registry = registry
        self.store = store
        self.address = address
        self.port = port
        self.interval = interval
        self.lease_duration = lease_duration
        self.clock = clock
        self.name = "apiserver-" + hashlib.sha256(f"{address}:{port}".encode()).hexdigest()[:16]

    def _def(self, group: str, version: str, plural: str) -> Any:
        definition = self.registry.get(group, version, plural)
        assert definition is not None
        return definition

    async def _renew(self) -> None:
        leases = self._def("coordination.k8s.io", "v1", "leases")
        now = _micro_time(self.clock())

        def mutate(lease: dict[str, Any]) -> dict[str, Any]:
            lease.setdefault("spec", {}).update(renewTime=now)
            return lease

        try:
            await self.store.guaranteed_update(leases, "kube-system", self.name, mutate)
        except NotFound:
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.name, "labels": {IDENTITY_LABEL: "kube-apiserver"},
                                 "annotations": {ADDRESS_ANNOTATION: self.address, PORT_ANNOTATION: str(self.port)}},
                    "spec": {"holderIdentity": self.name, "leaseDurationSeconds": int(self.lease_duration),
                             "acquireTime": now, "renewTime": now}}
            try:
                await self.store.create(leases, "kube-system", body)
            except AlreadyExists:
                pass

    async def live_servers(self, *, without_self: bool = False) -> list[tuple[str, int]]:
        leases = self._def("coordination.k8s.io", "v1", "leases")
        result = await self.store.storage.list(leases.namespace_prefix("kube-system"))

        now = self.clock()
        found = set()
        for kv in result.kvs:
            lease = load_object(leases, kv)
            meta, spec = lease.get("metadata") or {}, lease.get("spec") or {}
            if (meta.get("labels") or {}).get(IDENTITY_LABEL) != "kube-apiserver":
                continue
            if without_self and meta.get("name") == self.name:
                continue
            renewed = _parse_time(spec.get("renewTime") or "")
            if renewed + float(spec.get("leaseDurationSeconds") or self.lease_duration) < now:
                continue
            annotations = meta.get("annotations") or {}
            if annotations.get(ADDRESS_ANNOTATION) and (annotations.get(PORT_ANNOTATION) or "").isdigit():
                found.add((annotations[ADDRESS_ANNOTATION], int(annotations[PORT_ANNOTATION])))
        return sorted(found)

    async def _write(self, servers: list[tuple[str, int]]) -> None:
        ports = sorted({p for _, p in servers})
        subsets = [{"addresses": [{"ip": ip} for ip, p in servers if p == port],
                    "ports": [{"name": "https", "port": port, "protocol": "TCP"}]} for port in ports]
        endpoints = {"apiVersion": "v1", "kind": "Endpoints",
                     "metadata": {"name": "kubernetes", "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}}}
        if subsets:
            endpoints["subsets"] = subsets
        await self._put(self._def("", "v1", "endpoints"), endpoints, lambda cur: cur.get("subsets") == endpoints.get("subsets"))
        slice_ = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                  "metadata": {"name": "kubernetes", "labels": {"kubernetes.io/service-name": "kubernetes"}},
                  "addressType": "IPv4",
                  "endpoints": [{"addresses": [ip], "conditions": {"ready": True, "serving": True, "terminating": False}}
                                for ip, p in servers if p == (ports[0] if ports else 0)],
                  "ports": [{"name": "https", "port": ports[0], "protocol": "TCP"}] if ports else []}
        await self._put(self._def("discovery.k8s.io", "v1", "endpointslices"), slice_,
                        lambda cur: cur.get("endpoints") == slice_["endpoints"] and cur.get("ports") == slice_["ports"])

    async def _put(self, definition: Any, body: dict[str, Any], same: Callable[[dict[str, Any]], bool]) -> None:
        try:
            current = await self.store.get(definition, "default", "kubernetes")
        except NotFound:
            try:
                await self.store.create(definition, "default", body)
            except AlreadyExists:
                pass
            return
        if same(current):
            return
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        try:
            await self.store.update(definition, "default", "kubernetes", body)
        except (Conflict, NotFound):
            pass  # another server wrote it meanwhile; the next round checks again

    async def reconcile_once(self) -> None:
        await self._renew()
        await self._write(await self.live_servers())

    async def run(self) -> None:
        """After the first reconcile (which the server awaits while starting), one
        every ``interval`` s until cancelled; nothing more with ``interval`` <= 0."""
        if self.interval <= 0:
            return
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.reconcile_once()
            except asyncio.CancelledError:
                raise
            except (StatusError, OSError) as err:
                log.warning("could not reconcile the kubernetes endpoints", extra={"error": str(err)})

    async def remove_self(self) -> None:
        """On a clean stop: drop this server's Lease and rewrite without it."""
        try:
            await self.store.storage.delete(self._def("coordination.k8s.io", "v1", "leases").key("kube-system", self.name))
        except Exception:  # the store may be going away too
            pass
        try:
            await self._write(await self.live_servers(without_self=True))
        except Exception as err:
            log.info("could not remove this server from the kubernetes endpoints", extra={"error": str(err)})
