"""The aggregation layer: APIServices, and the requests of those served elsewhere.

``local_apiservices``  one local APIService per served group/version (built-ins and CRDs)
``remote``             APIServices backed by a Service: the table, availability checks,
                       their discovery documents
``front_proxy``        this server's client certificate and the X-Remote-* headers;
                       the extension-apiserver-authentication ConfigMap
``proxy``              relay a request (watches streamed) to the backend

:class:`Aggregator` is what the server and the HTTP routing use: ``remote_for``
tells whether a path belongs to a remote group/version, ``proxy`` relays it,
and ``groups``/``generation`` feed discovery (legacy and aggregated) and the
OpenAPI v3 root. ``run`` keeps local APIServices in step with the registry
and checks remote ones; everything is read from the watch cache.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

from aiohttp import web

from k8py.api.errors import AlreadyExists, StatusError
from k8py.apiserver.aggregator.front_proxy import FrontProxyIdentity, authentication_configmap
from k8py.apiserver.aggregator.local_apiservices import LocalAPIServices
from k8py.apiserver.aggregator.proxy import proxy_request
from k8py.apiserver.aggregator.remote import RemoteAPIs, RemoteAPIService
from k8py.apiserver.registry import Registry
from k8py.apiserver.store.object_store import ObjectStore
from k8py.apiserver.watch.cacher import Cacher
from k8py.apiserver.webhooks.service_resolver import ServiceResolver

__all__ = ["Aggregator", "FrontProxyIdentity", "RemoteAPIService"]

log = logging.getLogger(__name__)
Object = dict[str, Any]


class Aggregator:
    def __init__(self, registry: Registry, cacher: Cacher, store: ObjectStore, *, identity: FrontProxyIdentity | None = None,
                 now: Callable[[], str], check_interval: float = 30.0) -> None:
        self.registry = registry
        self.store = store
        self.identity = identity or FrontProxyIdentity.generate()
        self.local = LocalAPIServices(registry, store, cacher, now=now)
        self.remote = RemoteAPIs(registry, cacher, store, ServiceResolver(registry, cacher), self.identity,
                                 now=now, interval=check_interval)
        self._registry_generation = -1

    # -- routing --------------------------------------------------------------

    def remote_for(self, path: str) -> RemoteAPIService | None:
        """The remote APIService serving ``/apis/<group>/<version>[/...]``, if any."""
        if not path.startswith("/apis/"):
            return None
        parts = path.split("/", 4)
        if len(parts) < 4 or not parts[2] or not parts[3]:
            return None
        return self.remote.lookup(parts[2], parts[3])

    async def proxy(self, request: web.Request, entry: RemoteAPIService) -> web.StreamResponse:
        return await proxy_request(request, self.remote, entry)

    # -- discovery ------------------------------------------------------------

    @property
    def generation(self) -> int:
        self.remote.refresh()
        return self.remote.generation

    def groups(self) -> dict[str, list[tuple[str, Object | None]]]:
        """group -> [(version, APIResourceList or None)] of the remote APIServices, by priority."""
        entries = sorted(self.remote.refresh().values(), key=lambda e: (-e.group_priority, e.group, -e.version_priority, e.version))
        out: dict[str, list[tuple[str, Object | None]]] = {}
        for entry in entries:
            out.setdefault(entry.group, []).append((entry.version, entry.resources))
        return out

    def openapi_paths(self) -> dict[str, dict[str, str]]:
        return {f"apis/{e.group}/{e.version}": {"serverRelativeURL": e.openapi_url}
                for e in self.remote.refresh().values() if e.openapi_url}

    # -- lifecycle ------------------------------------------------------------

    async def bootstrap(self) -> None:
        """The local APIServices and the authentication ConfigMap, before the server is ready."""
        self._registry_generation = self.registry.generation
        await asyncio.gather(self.local.reconcile(), self._publish_front_proxy())

    async def _publish_front_proxy(self) -> None:
        definition = self.registry.get("", "v1", "configmaps")
        assert definition is not None
        configmap = authentication_configmap(self.identity)
        try:
            await self.store.create(definition, "kube-system", configmap)
        except AlreadyExists:
            await self.store.guaranteed_update(definition, "kube-system", configmap["metadata"]["name"],
                                               lambda current: {**current, "data": configmap["data"]})
        except StatusError as err:
            log.warning("could not write the front-proxy ConfigMap", extra={"error": err.message})

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(self.remote.run(), name="apiservice-availability")
            tasks.create_task(self._follow_registry(), name="local-apiservices")

    async def _follow_registry(self) -> None:
        while True:
            await asyncio.sleep(0.5)  # compares a counter; CRDs come and go rarely
            if self.registry.generation != self._registry_generation:
                self._registry_generation = self.registry.generation
                try:
                    await self.local.reconcile()
                except StatusError as err:
                    log.warning("local APIServices not reconciled", extra={"error": err.message})

    async def close(self) -> None:
        await self.remote.close()
