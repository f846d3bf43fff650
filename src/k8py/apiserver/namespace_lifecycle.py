"""Namespace lifecycle: where new objects may go, and what goes with a namespace.

Admission (upstream's NamespaceLifecycle plugin): a namespaced object can be
created only in a namespace that exists (404 ``namespaces "x" not found``) and
is not being deleted (403 ``unable to create new content in namespace x
because it is being terminated``). The namespace is looked up in the watch
cache first and, if absent there, in the store (the cache may lag a create
that just happened).

Deletion: when a namespace is deleted, every namespaced object in it is
deleted too (gracefully for bound pods, as a user's delete would). Upstream
does this in the namespace controller of kube-controller-manager; k8py does it
in the API server until the controller manager exists, through the same
generic deletion path.
"""

from __future__ import annotations

import asyncio
import logging

import orjson

from k8py.api.errors import Forbidden, NotFound
from k8py.apiserver.cacher import Cacher
from k8py.apiserver.deletion import DeleteOptions, delete_object
from k8py.apiserver.object_store import ObjectStore
from k8py.apiserver.registry import Registry, ResourceDefinition

__all__ = ["NamespaceLifecycle", "SYSTEM_NAMESPACES"]

log = logging.getLogger(__name__)

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_UNDELETABLE = ("default", "kube-system", "kube-public")


class NamespaceLifecycle:
    def __init__(self, registry: Registry, cacher: Cacher, store: ObjectStore) -> None:
        self.registry = registry
        self.cacher = cacher
        self.store = store
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def _namespaces(self) -> ResourceDefinition:
        definition = self.registry.get("", "v1", "namespaces")
        assert definition is not None
        return definition

    async def admit_create(self, definition: ResourceDefinition, namespace: str, name: str) -> None:
        ns_def = self._namespaces
        key = ns_def.key("", namespace)
        cached = self.cacher.cache_for(ns_def).objects.get(key)
        if cached is not None:
            ns = cached.decode()
        else:
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

    def admit_delete(self, namespace: str) -> None:
        if namespace in _UNDELETABLE:
            raise Forbidden(
                f'namespaces "{namespace}" is forbidden: this namespace may not be deleted',
                name=namespace,
                kind="namespaces",
            )

    def namespace_deleted(self, namespace: str) -> None:
        if namespace in SYSTEM_NAMESPACES:
            return
        task = asyncio.get_running_loop().create_task(self._delete_contents(namespace), name=f"namespace-cleanup-{namespace}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _delete_contents(self, namespace: str) -> None:
        opts = DeleteOptions(propagation_policy="Background")
        for definition in self.registry:
            if not definition.namespaced:
                continue
            cache = self.cacher.cache_for(definition)
            for obj in list(cache.candidates(namespace)):
                try:
                    await delete_object(self.store, definition, namespace, obj.name, opts)
                except NotFound:
                    pass
                except Exception:
                    log.exception("namespace cleanup failed", extra={"namespace": namespace, "object": obj.key})

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            try:
                await task
            except BaseException:
                pass
