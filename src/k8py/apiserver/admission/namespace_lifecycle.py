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
server keeps only the admission part here, as the ``NamespaceLifecycle``
plugin of the admission chain: on the DELETE of a namespace it refuses the
immortal ones (default, kube-system, kube-public) and starts the live lookup;
creates and updates of namespaced objects need their namespace to exist
(upstream also checks updates), creates one that is not terminating.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

import orjson

from k8py.api.errors import Cause, Forbidden, NotFound
from k8py.apiserver.admission.attributes import AdmissionAttributes, Operation
from k8py.apiserver.watch.cacher import Cacher
from k8py.apiserver.watch.watch_cache import CachedObject
from k8py.apiserver.store.object_store import ObjectStore
from k8py.apiserver.registry import Registry, ResourceDefinition

__all__ = ["NamespaceLifecycle", "SYSTEM_NAMESPACES"]

log = logging.getLogger(__name__)

Object = dict[str, Any]

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_UNDELETABLE = ("default", "kube-system", "kube-public")
#: how long after a namespace's deletion its admission reads the store (upstream's forceLiveLookupTTL)
LIVE_LOOKUP_TTL = 30.0


class NamespaceLifecycle:
    """The ``NamespaceLifecycle`` admission plugin (mutating phase, so it refuses first)."""

    name = "NamespaceLifecycle"

    def __init__(self, registry: Registry, cacher: Cacher, store: ObjectStore, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.registry = registry
        self.cacher = cacher
        self.store = store
        self._clock = clock
        #: namespace -> until when its admission reads the store, not the cache
        self._live_lookup: dict[str, float] = {}
        #: the last cached namespace decoded, per key: (its cached entry, the object); decoding
        #: a namespace for every write in it was most of this plugin's cost
        self._decoded: dict[str, tuple[CachedObject, Object]] = {}

    @property
    def _namespaces(self) -> ResourceDefinition:
        definition = self.registry.get("", "v1", "namespaces")
        assert definition is not None
        return definition

    def handles(self, operation: Operation) -> bool:
        return operation in (Operation.CREATE, Operation.UPDATE, Operation.DELETE)

    async def admit(self, attributes: AdmissionAttributes) -> None:
        """Upstream's ``Lifecycle.Admit``: namespaces themselves pass (an immortal one may not be
        deleted); other deletes pass; creates and updates need a live namespace, creates a
        namespace not being terminated."""
        if not attributes.namespace or (attributes.resource.group == "" and attributes.resource.resource == "namespaces"):
            if attributes.operation is Operation.DELETE and attributes.is_core("namespaces"):
                self.admit_delete(attributes.name)
                self.after_delete(attributes.name)
            return
        if attributes.operation is Operation.DELETE:
            return
        if attributes.resource.group == "authorization.k8s.io" and attributes.resource.resource.endswith("accessreviews"):
            return  # upstream: an access review must not reveal whether the namespace exists
        ns = await self._lookup(attributes.namespace)
        if attributes.operation is Operation.CREATE and (ns.get("metadata") or {}).get("deletionTimestamp"):
            raise attributes.forbidden(
                f"unable to create new content in namespace {attributes.namespace} because it is being terminated",
                (Cause("NamespaceTerminating", f"namespace {attributes.namespace} is being terminated", "metadata.namespace"),))

    async def _lookup(self, namespace: str) -> Object:
        ns_def = self._namespaces
        key = ns_def.key("", namespace)
        cached = self.cacher.cache_for(ns_def).objects.get(key)
        ns = self._decode(key, cached) if cached is not None else None
        if ns is not None and self._needs_live_lookup(namespace) and not (ns.get("metadata") or {}).get("deletionTimestamp"):
            ns = None  # deleted here moments ago, but the cache still shows it active: ask the store
        if ns is None:
            kv = await self.store.storage.get(key)
            if kv is None:
                raise NotFound.for_object("namespaces", namespace)
            ns = orjson.loads(kv.value)
        return ns

    def _decode(self, key: str, cached: CachedObject) -> Object:
        """The cached namespace as an object, decoded once per version the cache holds (the
        cache replaces an entry when the namespace changes; callers only read it)."""
        known = self._decoded.get(key)
        if known is not None and known[0] is cached:
            return known[1]
        ns = cached.decode()
        if len(self._decoded) >= 10_000:
            self._decoded.clear()
        self._decoded[key] = (cached, ns)
        return ns

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
        """A DELETE of namespace ``name`` is under way: for a while, read it from the store."""
        self._live_lookup[name] = self._clock() + LIVE_LOOKUP_TTL
