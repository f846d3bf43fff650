"""APIServices served elsewhere: where their requests go and whether they answer.

:class:`RemoteAPIs` keeps, from the watch cache, every APIService with a
``spec.service``: its group/version, how to reach it
(:class:`~k8py.apiserver.webhooks.service_resolver.ServiceResolver`) and
with which TLS settings (``caBundle`` or ``insecureSkipTLSVerify``, the
front-proxy client certificate). Its availability loop (upstream's
``AvailableConditionController``) asks each backend for its discovery
document ``/apis/<group>/<version>`` every ``interval`` seconds, and at once
when the APIServices change, and writes the ``Available`` condition:
``True``/``Passed``, or ``False`` with ``ServiceNotFound``,
``MissingEndpoints`` or ``FailedDiscoveryCheck`` and upstream's messages.
The discovery documents it fetched are what ``/apis`` and aggregated
discovery list for those groups; ``generation`` moves whenever they change.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import ssl
from dataclasses import dataclass
from typing import Any, Callable

import aiohttp
import orjson

from k8py.api.errors import Conflict, NotFound, ServiceUnavailable
from k8py.apiserver.registry import Registry, ResourceDefinition
from k8py.apiserver.store.object_store import ObjectStore
from k8py.apiserver.watch.cacher import Cacher
from k8py.apiserver.aggregator.front_proxy import FrontProxyIdentity
from k8py.apiserver.webhooks.service_resolver import ServiceResolver, ServiceTarget

__all__ = ["RemoteAPIs", "RemoteAPIService"]

log = logging.getLogger(__name__)
Object = dict[str, Any]


@dataclass
class RemoteAPIService:
    name: str
    group: str
    version: str
    namespace: str
    service: str
    port: int
    group_priority: int
    version_priority: int
    ssl: ssl.SSLContext
    #: the backend's APIResourceList, once a discovery check passed
    resources: Object | None = None
    #: the backend's /openapi/v3 entry for this group/version (serverRelativeURL)
    openapi_url: str = ""


class RemoteAPIs:
    def __init__(self, registry: Registry, cacher: Cacher, store: ObjectStore, resolver: ServiceResolver,
                 identity: FrontProxyIdentity, *, now: Callable[[], str], interval: float = 30.0) -> None:
        self.registry = registry
        self.cacher = cacher
        self.store = store
        self.resolver = resolver
        self.identity = identity
        self.now = now
        self.interval = interval
        self.generation = 0
        self._versions: tuple[tuple[str, int], ...] = ()
        #: (the APIServices' cache, its last change) when ``_versions`` was last compared
        self._stamp: tuple[int, int] = (0, -1)
        self._by_gv: dict[tuple[str, str], RemoteAPIService] = {}
        self._contexts: dict[tuple[str, bool], ssl.SSLContext] = {}
        self._session: aiohttp.ClientSession | None = None
        self._changed = asyncio.Event()

    # -- the table ------------------------------------------------------------

    @property
    def definition(self) -> ResourceDefinition:
        definition = self.registry.get("apiregistration.k8s.io", "v1", "apiservices")
        assert definition is not None
        return definition

    def refresh(self) -> dict[tuple[str, str], RemoteAPIService]:
        """The remote group/versions, rebuilt when an APIService changed (every request
        under ``/apis`` asks: the APIServices' cache is looked at only once it has changed)."""
        cache = self.cacher.cache_for(self.definition)
        stamp = (id(cache), cache.last_change)
        if stamp == self._stamp:
            return self._by_gv
        self._stamp = stamp
        objects = cache.objects
        versions = tuple(sorted((c.name, c.rv) for c in objects.values()))
        if versions == self._versions:
            return self._by_gv
        table: dict[tuple[str, str], RemoteAPIService] = {}
        for cached in objects.values():
            obj = orjson.loads(cached.data)
            spec = obj.get("spec") or {}
            service = spec.get("service")
            if not service:
                continue
            key = (spec.get("group", ""), spec.get("version", ""))
            previous = self._by_gv.get(key)
            entry = RemoteAPIService(
                obj["metadata"]["name"], key[0], key[1], service.get("namespace", ""), service.get("name", ""),
                int(service.get("port") or 443), int(spec.get("groupPriorityMinimum") or 0),
                int(spec.get("versionPriority") or 0),
                self._context(spec.get("caBundle") or "", bool(spec.get("insecureSkipTLSVerify"))))
            if previous is not None and (previous.namespace, previous.service, previous.port) == (entry.namespace, entry.service, entry.port):
                entry.resources, entry.openapi_url = previous.resources, previous.openapi_url
            table[key] = entry
        self._by_gv = table
        self._versions = versions
        self.generation += 1
        self._changed.set()
        return table

    def _context(self, ca_bundle: str, insecure: bool) -> ssl.SSLContext:
        key = (ca_bundle, insecure)
        context = self._contexts.get(key)
        if context is None:
            pem = base64.b64decode(ca_bundle).decode() if ca_bundle else None
            context = self._contexts[key] = self.identity.client_context(pem, insecure=insecure)
        return context

    def lookup(self, group: str, version: str) -> RemoteAPIService | None:
        return self.refresh().get((group, version))

    def target(self, entry: RemoteAPIService) -> ServiceTarget:
        return self.resolver.resolve(entry.namespace, entry.service, entry.port)

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            # the relay passes bodies through as the backend encoded them; checks ask for identity
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), auto_decompress=False,
                                                  skip_auto_headers=("Accept-Encoding", "User-Agent"))
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    # -- availability ---------------------------------------------------------

    async def run(self) -> None:
        """Check every remote APIService every ``interval`` s, and when they change."""
        while True:
            self._changed.clear()
            self.refresh()
            for entry in list(self._by_gv.values()):
                await self.check(entry)
            try:
                async with asyncio.timeout(self.interval):
                    while not self._changed.is_set():
                        await asyncio.sleep(0.2)  # the watch cache is read, not the store: cheap
                        self.refresh()
            except TimeoutError:
                pass

    async def check(self, entry: RemoteAPIService) -> None:
        path = f"/apis/{entry.group}/{entry.version}"
        try:
            target = self.target(entry)
        except ServiceUnavailable as err:
            reason = "ServiceNotFound" if "not found" in err.message else "MissingEndpoints"
            message = (f'service/{entry.service} in "{entry.namespace}" is not present' if reason == "ServiceNotFound"
                       else f'endpoints for service/{entry.service} in "{entry.namespace}" have no addresses')
            await self._set_available(entry, False, reason, message)
            return
        url = target.url(path)
        try:
            async with asyncio.timeout(5.0):
                async with self.session().get(url, ssl=entry.ssl, server_hostname=target.server_name,
                                              headers={"Accept": "application/json", "Accept-Encoding": "identity"}) as response:
                    body = await response.read()
                    status = response.status
        except asyncio.CancelledError:
            raise
        except (aiohttp.ClientError, OSError, TimeoutError) as err:
            await self._fail(entry, url, f"{type(err).__name__}: {err}" if str(err) else type(err).__name__)
            return
        if status != 200:
            await self._fail(entry, url, f"bad status from {url}: {status}")
            return
        try:
            resources = orjson.loads(body)
        except orjson.JSONDecodeError:
            await self._fail(entry, url, "the discovery document is not JSON")
            return
        if resources != entry.resources:
            entry.resources = resources
            self.generation += 1
        entry.openapi_url = await self._openapi_url(entry, target) or entry.openapi_url
        await self._set_available(entry, True, "Passed", "all checks passed")

    async def _fail(self, entry: RemoteAPIService, url: str, error: str) -> None:
        if entry.resources is not None:
            entry.resources = None
            self.generation += 1
        await self._set_available(entry, False, "FailedDiscoveryCheck", f"failing or missing response from {url}: {error}")

    async def _openapi_url(self, entry: RemoteAPIService, target: ServiceTarget) -> str:
        try:
            async with asyncio.timeout(5.0):
                async with self.session().get(target.url("/openapi/v3"), ssl=entry.ssl, server_hostname=target.server_name,
                                              headers={"Accept-Encoding": "identity"}) as response:
                    if response.status != 200:
                        return ""
                    root = orjson.loads(await response.read())
        except asyncio.CancelledError:
            raise
        except (aiohttp.ClientError, OSError, TimeoutError, orjson.JSONDecodeError):
            return ""
        item = ((root or {}).get("paths") or {}).get(f"apis/{entry.group}/{entry.version}") or {}
        return str(item.get("serverRelativeURL") or "")

    async def _set_available(self, entry: RemoteAPIService, available: bool, reason: str, message: str) -> None:
        status = "True" if available else "False"

        def mutate(current: Object) -> Object:
            conditions = [c for c in (current.get("status") or {}).get("conditions") or [] if c.get("type") != "Available"]
            old = next((c for c in (current.get("status") or {}).get("conditions") or [] if c.get("type") == "Available"), None)
            if old is not None and (old.get("status"), old.get("reason"), old.get("message")) == (status, reason, message):
                return current
            since = old["lastTransitionTime"] if old is not None and old.get("status") == status else self.now()
            conditions.append({"type": "Available", "status": status, "lastTransitionTime": since,
                               "reason": reason, "message": message})
            current["status"] = {**(current.get("status") or {}), "conditions": conditions}
            return current

        try:
            await self.store.guaranteed_update(self.definition, "", entry.name, mutate, subresource="status")
        except (NotFound, Conflict):
            pass
