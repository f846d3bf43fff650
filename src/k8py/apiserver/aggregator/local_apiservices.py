"""The local APIServices: one per group/version this server serves itself.

As kube-apiserver's autoregister controller: every built-in group/version
gets an APIService ``<version>.<group>`` (``v1.`` for the core group) with no
``spec.service``, upstream's priorities, the label
``kube-aggregator.kubernetes.io/automanaged: onstart`` and the status
``Available=True`` (reason ``Local``, set by the APIService strategy as it is created). Group/versions of
CustomResourceDefinitions get one too, labelled ``automanaged: "true"``
(priority 1000/100, as upstream's CRD registration controller), and lose it
when the last CRD of that group/version goes. APIServices a user created are
never touched.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

from k8py.api.errors import AlreadyExists, Conflict, NotFound, StatusError
from k8py.apiserver.registry import Registry, ResourceDefinition
from k8py.apiserver.store.object_store import ObjectStore
from k8py.apiserver.watch.cacher import Cacher

__all__ = ["LocalAPIServices", "PRIORITIES", "AUTOMANAGED"]

log = logging.getLogger(__name__)
Object = dict[str, Any]

AUTOMANAGED = "kube-aggregator.kubernetes.io/automanaged"

#: (group, version) -> (groupPriorityMinimum, versionPriority), upstream's table for v1.32
PRIORITIES: dict[tuple[str, str], tuple[int, int]] = {
    ("", "v1"): (18000, 1),
    ("apps", "v1"): (17800, 15),
    ("events.k8s.io", "v1"): (17750, 15),
    ("authentication.k8s.io", "v1"): (17700, 15),
    ("authorization.k8s.io", "v1"): (17600, 15),
    ("autoscaling", "v2"): (17500, 30),
    ("autoscaling", "v1"): (17500, 15),
    ("batch", "v1"): (17400, 15),
    ("certificates.k8s.io", "v1"): (17300, 15),
    ("networking.k8s.io", "v1"): (17200, 15),
    ("policy", "v1"): (17100, 15),
    ("rbac.authorization.k8s.io", "v1"): (17000, 15),
    ("storage.k8s.io", "v1"): (16800, 15),
    ("apiextensions.k8s.io", "v1"): (16700, 15),
    ("admissionregistration.k8s.io", "v1"): (16700, 15),
    ("scheduling.k8s.io", "v1"): (16600, 15),
    ("coordination.k8s.io", "v1"): (16500, 15),
    ("node.k8s.io", "v1"): (16300, 15),
    ("discovery.k8s.io", "v1"): (16200, 15),
    ("flowcontrol.apiserver.k8s.io", "v1"): (16100, 21),
    ("apiregistration.k8s.io", "v1"): (16700, 15),
    # served here, by metrics-server upstream (its manifest's priorities)
    ("metrics.k8s.io", "v1beta1"): (100, 100),
}
_CRD_PRIORITY = (1000, 100)


def apiservice_name(group: str, version: str) -> str:
    return f"{version}.{group}"  # "v1." for the core group, as upstream


class LocalAPIServices:
    def __init__(self, registry: Registry, store: ObjectStore, cacher: Cacher, *, now: Callable[[], str]) -> None:
        self.registry = registry
        self.store = store
        self.cacher = cacher
        self.now = now

    @property
    def definition(self) -> ResourceDefinition:
        definition = self.registry.get("apiregistration.k8s.io", "v1", "apiservices")
        assert definition is not None
        return definition

    def _existing(self) -> dict[str, Object]:
        import orjson

        return {c.name: orjson.loads(c.data) for c in self.cacher.cache_for(self.definition).objects.values()}

    def wanted(self) -> dict[str, tuple[str, str, str, tuple[int, int]]]:
        """name -> (group, version, automanaged label, priorities) for every served group/version."""
        out: dict[str, tuple[str, str, str, tuple[int, int]]] = {}
        for definition in self.registry:
            key = (definition.group, definition.version)
            name = apiservice_name(*key)
            if name in out:
                continue
            if key in PRIORITIES and not definition.custom:
                out[name] = (definition.group, definition.version, "onstart", PRIORITIES[key])
            elif definition.custom:
                out[name] = (definition.group, definition.version, "true", _CRD_PRIORITY)
        return out

    async def reconcile(self) -> None:
        """Create what is missing and drop stale CRD ones; the writes go out together (the
        store commits concurrent writes as one group: start-up pays two commits, not forty)."""
        existing = self._existing()
        wanted = self.wanted()
        await asyncio.gather(*(self._create(name, *spec) for name, spec in wanted.items() if name not in existing))
        stale = [name for name, obj in existing.items()
                 if ((obj.get("metadata") or {}).get("labels") or {}).get(AUTOMANAGED) == "true" and name not in wanted]
        unavailable = [name for name, obj in existing.items()
                       if name in wanted and not (obj.get("spec") or {}).get("service") and not _available(obj)]
        # new local APIServices start Available (the strategy's initial status); older ones may not be
        await asyncio.gather(*(self._mark_available(name) for name in unavailable), *(self._delete(name) for name in stale))

    async def _create(self, name: str, group: str, version: str, label: str, priorities: tuple[int, int]) -> str | None:
        group_min, version_priority = priorities
        obj = {
            "metadata": {"name": name, "labels": {AUTOMANAGED: label}},
            "spec": {**({"group": group} if group else {}), "version": version,  # group: omitempty
                     "groupPriorityMinimum": group_min, "versionPriority": version_priority},
        }
        try:
            await self.store.create(self.definition, "", obj)
        except AlreadyExists:
            return None
        except StatusError as err:
            log.warning("could not create a local APIService", extra={"apiservice": name, "error": err.message})
            return None
        return name

    async def _delete(self, name: str) -> None:
        try:
            await self.store.storage.delete(self.definition.key("", name))
        except Exception as err:  # gone already, or the store is closing: the next pass tries again
            log.debug("could not delete a stale APIService", extra={"apiservice": name, "error": str(err)})

    async def _mark_available(self, name: str) -> None:
        def mutate(current: Object) -> Object:
            current["status"] = {"conditions": [{
                "type": "Available", "status": "True", "lastTransitionTime": self.now(),
                "reason": "Local", "message": "Local APIServices are always available"}]}
            return current

        try:
            await self.store.guaranteed_update(self.definition, "", name, mutate, subresource="status")
        except (NotFound, Conflict):
            pass


def _available(obj: Object) -> bool:
    return any(c.get("type") == "Available" and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])
