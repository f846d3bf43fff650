"""Namespace lifecycle: where new objects may go, and what goes with a namespace.

Admission (upstream's NamespaceLifecycle plugin): a namespaced object can be
created only in a namespace that exists (404 ``namespaces "x" not found``) and
is not being deleted (403 ``unable to create new content in namespace x
because it is being terminated``). The namespace is looked up in the watch
cache first and, if absent there, in the store (the cache may lag a create
that just happened).

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

import orjson

from k8py.api.errors import Forbidden, NotFound
from k8py.apiserver.watch.cacher import Cacher
from k8py.apiserver.store.object_store import ObjectStore
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

    def after_delete(self, name: str) -> None:
        """DeleteHooks: a DELETE of namespace ``name`` went through (it is
        Terminating, or gone); the namespace controller takes it from here."""
