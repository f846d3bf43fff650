"""The objects every cluster has, made when the API server starts (upstream's bootstrap controllers).

The system namespaces (``default``, ``kube-system``, ``kube-public``,
``kube-node-lease``), the ``kubernetes`` Service in ``default``, the built-in
PriorityClasses, the RBAC bootstrap policy, and API Priority and Fairness'
default FlowSchemas and priority levels. Each is created only where it is
missing, so a restart, or another API server on the same etcd, leaves what is
there alone (a create that finds the object made meanwhile is not an error).
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from k8py.api.errors import AlreadyExists
from k8py.apiserver.admission.namespace_lifecycle import SYSTEM_NAMESPACES
from k8py.apiserver.authz.reconcile import reconcile_bootstrap_policy
from k8py.apiserver.overload.bootstrap import FLOW_SCHEMAS, GROUP as FLOWCONTROL_GROUP, PRIORITY_LEVELS
from k8py.apiserver.registry import Registry
from k8py.apiserver.resources.scheduling import BUILTIN_PRIORITY_CLASSES
from k8py.apiserver.store.object_store import ObjectStore
from k8py.apiserver.watch.cacher import Cacher
from k8py.storage import Storage

__all__ = ["BootstrapObjects"]


class BootstrapObjects:
    def __init__(self, registry: Registry, store: ObjectStore, storage: Storage, cacher: Cacher,
                 kubernetes_service_ip: str) -> None:
        self.registry = registry
        self.store = store
        self.storage = storage
        self.cacher = cacher
        self.kubernetes_service_ip = kubernetes_service_ip

    async def ensure_all(self) -> None:
        """The objects every cluster has (upstream's bootstrap controllers). The
        namespaces first, in order; then everything else at once: the store
        commits concurrent writes as one group, where one after another each
        waited for a commit of its own (on a fresh store some thirty, the
        largest part of the start's wall time)."""
        ns_def = self.registry.get("", "v1", "namespaces")
        assert ns_def is not None
        for name in SYSTEM_NAMESPACES:
            await self.ensure(ns_def, "", {"metadata": {"name": name}})
        svc_def = self.registry.get("", "v1", "services")
        pc_def = self.registry.get("scheduling.k8s.io", "v1", "priorityclasses")
        assert svc_def is not None and pc_def is not None
        writes = [self.ensure(
            svc_def,
            "default",
            {
                "metadata": {
                    "name": "kubernetes",
                    "labels": {"component": "apiserver", "provider": "kubernetes"},
                },
                "spec": {
                    "type": "ClusterIP",
                    "clusterIP": self.kubernetes_service_ip,
                    "clusterIPs": [self.kubernetes_service_ip],
                    "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}],
                    "sessionAffinity": "None",
                },
            },
        )]
        writes += [self.ensure(pc_def, "", copy.deepcopy(pc)) for pc in BUILTIN_PRIORITY_CLASSES]
        writes.append(reconcile_bootstrap_policy(self.registry, self.store, absent=self.absent))
        for plural, objects in (("prioritylevelconfigurations", PRIORITY_LEVELS), ("flowschemas", FLOW_SCHEMAS)):
            definition = self.registry.get(FLOWCONTROL_GROUP, "v1", plural)
            assert definition is not None
            writes += [self.ensure(definition, "", copy.deepcopy(obj)) for obj in objects]
        await asyncio.gather(*writes)

    def absent(self, definition: Any, namespace: str, name: str) -> bool:
        """True when the watch cache, loaded from the whole store just before the
        bootstrap, has no such object (so it need not be read from the store first:
        on a fresh store some 300 reads, each a trip to the store's reader thread,
        on the way to the first answer). Another API server on the same etcd may
        create it meanwhile: the create's AlreadyExists says so, as before."""
        if not self.cacher.ready.is_set():
            return False
        return self.cacher.cache_for(definition).objects.get(definition.key(namespace, name)) is None

    async def ensure(self, definition: Any, namespace: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        if not self.absent(definition, namespace, name) and await self.storage.get(definition.key(namespace, name)) is not None:
            return  # a restart: it is there already
        try:
            await self.store.create(definition, namespace, obj)
        except AlreadyExists:
            pass
