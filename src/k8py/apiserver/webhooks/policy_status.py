"""The status of ValidatingAdmissionPolicies: what upstream's type-checking controller reports.

Upstream checks each policy's expressions against the schemas of the kinds
it matches and writes ``status.typeChecking.expressionWarnings`` with
``status.observedGeneration``; clients wait for ``typeChecking`` to know a
policy has been looked at. k8py's CEL environment types objects as ``dyn``
(there is no schema to check against), and expressions that do not compile
are refused on write, so the check has no warnings to give: this writer sets
``observedGeneration`` and an empty ``typeChecking`` once per generation.
It reads the watch cache (a comparison of versions each half second) and
writes only when a policy's generation moved.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import orjson

from k8py.api.errors import Conflict, NotFound, StatusError
from k8py.apiserver.registry import Registry
from k8py.apiserver.store.object_store import ObjectStore
from k8py.apiserver.watch.cacher import Cacher

__all__ = ["PolicyStatusWriter"]

log = logging.getLogger(__name__)
Object = dict[str, Any]


class PolicyStatusWriter:
    def __init__(self, registry: Registry, cacher: Cacher, store: ObjectStore, *, interval: float = 0.5) -> None:
        self.registry = registry
        self.cacher = cacher
        self.store = store
        self.interval = interval
        self._seen: tuple[tuple[str, int], ...] = ()

    async def run(self) -> None:
        while True:
            try:
                await self.sync_once()
            except StatusError as err:
                log.warning("policy status not written", extra={"error": err.message})
            await asyncio.sleep(self.interval)  # polls the in-memory cache, never the store

    async def sync_once(self) -> None:
        definition = self.registry.get("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies")
        if definition is None:
            return
        objects = self.cacher.cache_for(definition).objects
        versions = tuple(sorted((c.name, c.rv) for c in objects.values()))
        if versions == self._seen:
            return
        for cached in list(objects.values()):
            policy = orjson.loads(cached.data)
            generation = (policy.get("metadata") or {}).get("generation") or 1
            status = policy.get("status") or {}
            if status.get("observedGeneration") == generation and "typeChecking" in status:
                continue

            def mutate(current: Object, generation: int = generation) -> Object:
                status = dict(current.get("status") or {})
                status["observedGeneration"] = generation
                status["typeChecking"] = {}
                current["status"] = status
                return current

            try:
                await self.store.guaranteed_update(definition, "", cached.name, mutate, subresource="status")
            except (NotFound, Conflict):
                continue
        self._seen = versions
