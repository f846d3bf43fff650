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
refused.

Deletion, as upstream: a namespace is created with ``spec.finalizers:
[kubernetes]``; deleting it marks it ``Terminating`` (deletionTimestamp,
``status.phase``, see ``handlers/deletion``). Removing its content is the
namespace controller's job (``k8py.controllers.namespace``, in the controller
manager): it deletes everything in the namespace, then clears the
``kubernetes`` finalizer through ``/finalize``, and that update deletes the
namespace once no finalizer is left (``handlers/subresources``). The API
server keeps only the admission part here, served to the generic DELETE as
the namespaces' ``DeleteHooks`` (``admit_delete``, ``after_delete``).
"""

from __future__ import annotations

import logging
import time
from typing import Callable

import orjson

from k8py.api.errors import Forbidden, NotFound
from k8py.apiserver.watch.cacher import Cacher
from k8py.apiserver.store.object_store import ObjectStore
from k8py.apiserver.registry import Registry, ResourceDefinition

__all__ = ["NamespaceLifecycle", "SYSTEM_NAMESPACES"]

log = logging.getLogger(__name__)

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_UNDELETABLE = ("default", "kube-system", "kube-public")
#: how long after a namespace's deletion its admission reads the store (upstream's forceLiveLookupTTL)
LIVE_LOOKUP_TTL = 30.0


class NamespaceLifecycle:
    def __init__(self, registry: Registry, cacher: Cacher, store: ObjectStore, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.registry = registry
        self.cacher = cacher
        self.store = store
        self._clock = clock
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
        """DeleteHooks: a DELETE of namespace ``name`` went through (it is
        Terminating, or gone); the namespace controller takes it from here."""
        self._live_lookup[name] = self._clock() + LIVE_LOOKUP_TTL
