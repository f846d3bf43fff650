"""Monitors: one metadata-only informer per deletable resource the server
serves, found through discovery and refreshed periodically, so resources
added later (custom resources) are covered (upstream ``resyncMonitors``).

A resource some other controller already watches (pods, ReplicaSets,
Deployments, Nodes…) is read from that controller's shared informer, as
upstream's GC asks the shared informer factory first: one watch and one cache
of pods per process instead of two (each pod event decoded once; at 10,000
pods the second watch was half the controller manager's decoding). For the
rest the collector reads only ownership fields, so it watches them with
informers of its *own* :class:`~k8py.client.informer_factory.InformerFactory`
that keep only ``apiVersion``, ``kind`` and the metadata it needs, as
upstream's metadata informers do (a transform applies to every user of an
informer, and other controllers need whole objects). Either way the graph is
handed the same metadata-only view.

Events are ignored (``events`` in both groups), as upstream's default
``--gc-ignored-resources``.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from k8py.client.informer_factory import InformerFactory
from k8py.client.keys import DeletedFinalStateUnknown
from k8py.client.resource import Resource
from k8py.client.rest import RestClient
from k8py.client.shared_informer import SharedIndexInformer

__all__ = ["Monitors", "IGNORED_RESOURCES"]

logger = logging.getLogger(__name__)

IGNORED_RESOURCES = {("", "events"), ("events.k8s.io", "events")}
_KEPT_META = ("name", "namespace", "uid", "resourceVersion", "ownerReferences", "finalizers", "deletionTimestamp")


def _metadata_only(resource: Resource) -> Callable[[Any], Any]:
    def transform(obj: Any) -> Any:
        meta = obj.get("metadata") or {}
        return {"apiVersion": resource.api_version, "kind": resource.kind,
                "metadata": {k: meta[k] for k in _KEPT_META if k in meta}}
    return transform


class Monitors:
    def __init__(self, client: RestClient, *, on_change: Callable[[Any], None], on_delete: Callable[[Any], None], clock: Any = None,
                 shared: InformerFactory | None = None) -> None:
        self.client = client
        self.shared = shared
        self.factory = InformerFactory(client, clock=clock) if clock is not None else InformerFactory(client)
        self._on_change = on_change
        self._on_delete = on_delete
        self.informers: dict[tuple[str, str], SharedIndexInformer] = {}
        self.resources: dict[tuple[str, str], Resource] = {}  # (group, kind) -> resource

    def lookup(self, api_version: str, kind: str) -> Resource | None:
        group = api_version.split("/", 1)[0] if "/" in api_version else ""
        return self.resources.get((group, kind))

    def is_namespaced(self, api_version: str, kind: str) -> bool | None:
        resource = self.lookup(api_version, kind)
        return None if resource is None else resource.namespaced

    async def sync(self) -> int:
        """Discover resources and add a monitor for each new one; returns how many were added."""
        discovery = self.client.discovery
        discovery.invalidate()
        infos = await discovery.server_resources()
        added = 0
        for info in infos:
            r = info.resource
            if not info.preferred or (r.group, r.plural) in IGNORED_RESOURCES:
                continue
            if not {"list", "watch", "delete"} <= set(info.verbs):
                continue
            self.resources.setdefault((r.group, r.kind), r)
            if (r.group, r.plural) in self.informers:
                continue
            informer = self.shared.existing(r.group, r.plural) if self.shared is not None else None
            if informer is not None:
                view = _metadata_only(r)
                informer.add_event_handler(on_add=lambda obj, view=view: self._on_change(view(obj)),
                                           on_update=lambda old, new, view=view: self._on_change(view(new)),
                                           on_delete=lambda obj, view=view: self._deleted(obj, view))
            else:
                informer = self.factory.informer(r)
                informer.set_transform(_metadata_only(r))
                informer.add_event_handler(on_add=self._on_change, on_update=lambda old, new: self._on_change(new),
                                           on_delete=self._deleted)
            self.informers[(r.group, r.plural)] = informer
            added += 1
        if added:
            logger.info("garbage collector monitors", extra={"added": added, "total": len(self.informers)})
            self.factory.start()
        return added

    def _deleted(self, obj: Any, view: Callable[[Any], Any] | None = None) -> None:
        if isinstance(obj, DeletedFinalStateUnknown):
            if obj.obj is None:
                return
            obj = obj.obj
        self._on_delete(view(obj) if view is not None else obj)

    def has_synced(self) -> bool:
        return all(i.has_synced() for i in self.informers.values())

    async def shutdown(self) -> None:
        await self.factory.shutdown()
