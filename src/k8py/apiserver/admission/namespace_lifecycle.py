"""Namespace lifecycle: where new objects may go, and what goes with a namespace.

Admission (upstream's NamespaceLifecycle plugin): a namespaced object can be
created only in a namespace that exists (404 ``namespaces "x" not found``) and
is not being deleted (403 ``unable to create new content in namespace x
because it is being terminated``). The namespace is looked up in the watch
cache first and, if absent there, in the store (the cache may lag a create
that just happened). The cache may lag a deletion too: for
``LIVE_LOOKUP_TTL`` seconds after this server deleted a namespace, a cached
view that still shows it active is not trusted and the store is read
(upstream's ``forceLiveLookupCache``), so a create right after the delete is
refused. The cleanup likewise waits for a consistent cache before it
concludes a namespace is empty.

Deletion, as upstream: a namespace is created with ``spec.finalizers:
[kubernetes]``; deleting it marks it ``Terminating`` (deletionTimestamp,
``status.phase``), then every namespaced object in it is deleted (gracefully
for bound pods, as a user's delete would), and once none is left the
``kubernetes`` finalizer is cleared and the namespace itself deleted.
Upstream does the middle part in the namespace controller of
kube-controller-manager; k8py does it in the API server (a task per
terminating namespace, resumed after a restart) until the controller manager
exists, through the same generic deletion path: the server hands it a
:data:`Delete` function (the handlers' ``delete_object``), so admission does
not import the handlers. It serves the namespaces' ``DeleteHooks``
(``admit_delete``, ``after_delete``) to the generic DELETE.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Awaitable, Callable, Protocol

import orjson

from k8py.api.errors import Forbidden, NotFound
from k8py.apiserver.watch.cacher import Cacher
from k8py.apiserver.store.object_store import ObjectStore
from k8py.apiserver.registry import Registry, ResourceDefinition

__all__ = ["Delete", "NamespaceLifecycle", "SYSTEM_NAMESPACES"]

log = logging.getLogger(__name__)

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_UNDELETABLE = ("default", "kube-system", "kube-public")
#: how long after a namespace's deletion its admission reads the store (upstream's forceLiveLookupTTL)
LIVE_LOOKUP_TTL = 30.0


class Delete(Protocol):
    """Delete one object as a user's DELETE would (graceful for bound pods,
    finalizers respected); raises NotFound if it is gone."""

    def __call__(
        self, definition: ResourceDefinition, namespace: str, name: str, *, propagation_policy: str | None = None
    ) -> Awaitable[object]: ...


class NamespaceLifecycle:
    def __init__(
        self, registry: Registry, cacher: Cacher, store: ObjectStore, delete: Delete, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.registry = registry
        self.cacher = cacher
        self.store = store
        self.delete = delete
        self._clock = clock
        self._tasks: set[asyncio.Task[None]] = set()
        self._running: set[str] = set()
        #: namespace -> until when its admission reads the store, not the cache
        self._live_lookup: dict[str, float] = {}

    @property
    def _namespaces(self) -> ResourceDefinition:
        definition = self.registry.get("", "v1", "namespaces")
        assert definition is not None
        return definition

    async def admit_create(self, definition: ResourceDefinition, namespace: str, name: str) -> None:
        ns_def = self._namespaces
        key = ns_def.key("", namespace)
        cached = self.cacher.cache_for(ns_def).objects.get(key)
        ns = cached.decode() if cached is not None else None
        if ns is not None and self._needs_live_lookup(namespace) and not (ns.get("metadata") or {}).get("deletionTimestamp"):
            ns = None  # deleted here moments ago, but the cache still shows it active: ask the store
        if ns is None:
            kv = await self.store.storage.get(key)
            if kv is None:
                raise NotFound.for_object("namespaces", namespace)
            ns = orjson.loads(kv.value)
        if (ns.get("metadata") or {}).get("deletionTimestamp"):
            raise Forbidden(
                f'{definition.qualified} "{name}" is forbidden: unable to create new content in namespace '
                f"{namespace} because it is being terminated",
                name=name,
                group=definition.group,
                kind=definition.plural,
            )

    def _needs_live_lookup(self, namespace: str) -> bool:
        until = self._live_lookup.get(namespace)
        if until is None:
            return False
        if self._clock() < until:
            return True
        del self._live_lookup[namespace]
        return False

    def admit_delete(self, namespace: str) -> None:
        if namespace in _UNDELETABLE:
            raise Forbidden(
                f'namespaces "{namespace}" is forbidden: this namespace may not be deleted',
                name=namespace,
                kind="namespaces",
            )

    def after_delete(self, name: str) -> None:
        """DeleteHooks: a DELETE of namespace ``name`` went through."""
        self.namespace_deleted(name)

    def namespace_deleted(self, namespace: str) -> None:
        """A namespace was deleted (or went Terminating): remove its content,
        then clear its ``kubernetes`` finalizer and delete it for good."""
        self._live_lookup[namespace] = self._clock() + LIVE_LOOKUP_TTL
        if namespace in SYSTEM_NAMESPACES or namespace in self._running:
            return
        self._running.add(namespace)
        task = asyncio.get_running_loop().create_task(self._finalize(namespace), name=f"namespace-cleanup-{namespace}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(lambda _t: self._running.discard(namespace))

    def resume(self) -> None:
        """After a restart: finish every namespace left Terminating."""
        ns_def = self._namespaces
        for cached in list(self.cacher.cache_for(ns_def).objects.values()):
            if (cached.decode().get("metadata") or {}).get("deletionTimestamp"):
                self.namespace_deleted(cached.name)

    async def _finalize(self, namespace: str) -> None:
        delay = 0.05
        while True:
            # an object created just before the namespace went Terminating may
            # not be in the cache yet: never conclude "empty" from a stale view
            consistent = await self.cacher.wait_consistent()
            remaining = 0
            for definition in self.registry:
                if not definition.namespaced or definition.converter is not None:
                    continue  # views (events.k8s.io) share their stored kind's objects
                for obj in list(self.cacher.cache_for(definition).candidates(namespace)):
                    remaining += 1
                    if (obj.decode().get("metadata") or {}).get("deletionTimestamp"):
                        continue  # already going: graceful pods, finalizers
                    try:
                        await self.delete(definition, namespace, obj.name, propagation_policy="Background")
                    except NotFound:
                        pass
                    except Exception:
                        log.exception("namespace cleanup failed", extra={"namespace": namespace, "object": obj.key})
            if not remaining and consistent:
                break
            await asyncio.sleep(delay)  # let the cache see the deletes; pods may take their grace period
            delay = min(delay * 2, 2.0)
        ns_def = self._namespaces

        def drop_kubernetes_finalizer(ns: dict) -> dict:
            spec = ns.setdefault("spec", {})
            spec["finalizers"] = [f for f in spec.get("finalizers") or [] if f != "kubernetes"]
            return ns

        try:
            await self.store.guaranteed_update(ns_def, "", namespace, drop_kubernetes_finalizer, subresource="finalize")
            await self.delete(ns_def, "", namespace)
        except NotFound:
            pass

    async def close(self) -> None:
        """Cancel the cleanup tasks and wait for them; a cancellation of the caller propagates."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if not tasks:
            return
        await asyncio.wait(tasks)
        for task in tasks:
            if not task.cancelled() and task.exception() is not None:
                log.error("namespace cleanup ended with an error", exc_info=task.exception(), extra={"task": task.get_name()})
