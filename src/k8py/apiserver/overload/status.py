"""The ``Dangling`` condition of FlowSchemas (upstream's APF configuration controller writes it).

Every FlowSchema gets ``status.conditions[type=Dangling]``:

- ``True`` / ``NotFound`` / ``This FlowSchema references the
  PriorityLevelConfiguration object named "X" but there is no such object``
  when its level does not exist (the filter skips such a schema: a request
  falls through to the next one that matches);
- ``False`` / ``Found`` / ``... named "X" and it exists`` otherwise;

with ``lastTransitionTime`` moved only when the status changes. kubectl's
``MISSINGPL`` column shows it. :func:`dangling_condition` is the pure rule;
:class:`DanglingConditions` writes it through the ``status`` subresource
whenever either kind changed in the watch cache (a comparison of resource
versions, no store reads).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

import orjson

from k8py.api.errors import Conflict, NotFound
from k8py.apiserver.registry import Registry
from k8py.apiserver.store.object_store import ObjectStore
from k8py.apiserver.watch.cacher import Cacher

__all__ = ["DanglingConditions", "dangling_condition"]

log = logging.getLogger(__name__)
Object = dict[str, Any]
GROUP, VERSION = "flowcontrol.apiserver.k8s.io", "v1"


def dangling_condition(level_name: str, exists: bool) -> tuple[str, str, str]:
    """(status, reason, message) of a FlowSchema's Dangling condition."""
    if exists:
        return "False", "Found", f'This FlowSchema references the PriorityLevelConfiguration object named "{level_name}" and it exists'
    return ("True", "NotFound",
            f'This FlowSchema references the PriorityLevelConfiguration object named "{level_name}" but there is no such object')


class DanglingConditions:
    def __init__(self, registry: Registry, cacher: Cacher, store: ObjectStore, *, now: Callable[[], str]) -> None:
        self.registry, self.cacher, self.store, self.now = registry, cacher, store, now
        self._seen: tuple[Any, ...] = ()

    async def sync_once(self) -> None:
        schemas_def = self.registry.get(GROUP, VERSION, "flowschemas")
        levels_def = self.registry.get(GROUP, VERSION, "prioritylevelconfigurations")
        if schemas_def is None or levels_def is None:
            return
        schemas = self.cacher.cache_for(schemas_def).objects
        levels = self.cacher.cache_for(levels_def).objects
        seen = (tuple(sorted((c.name, c.rv) for c in schemas.values())), frozenset(c.name for c in levels.values()))
        if seen == self._seen:
            return
        names = seen[1]
        writes = []
        for cached in list(schemas.values()):
            fs = orjson.loads(cached.data)
            level = ((fs.get("spec") or {}).get("priorityLevelConfiguration") or {}).get("name") or ""
            wanted = dangling_condition(level, level in names)
            old = next((c for c in (fs.get("status") or {}).get("conditions") or () if c.get("type") == "Dangling"), None)
            if old is not None and (old.get("status"), old.get("reason"), old.get("message")) == wanted:
                continue
            writes.append(self._write(schemas_def, cached.name, wanted))
        # at once: the store commits them as one group (a server just started writes
        # every bootstrap FlowSchema's first status before it says ready)
        await asyncio.gather(*writes)
        self._seen = seen

    async def _write(self, schemas_def: Any, name: str, wanted: tuple[str, str, str]) -> None:
        try:
            await self.store.guaranteed_update(schemas_def, "", name, self._mutation(wanted), subresource="status")
        except (NotFound, Conflict):
            pass

    def _mutation(self, wanted: tuple[str, str, str]) -> Callable[[Object], Object]:
        status, reason, message = wanted

        def mutate(current: Object) -> Object:
            conditions = list((current.get("status") or {}).get("conditions") or [])
            old = next((c for c in conditions if c.get("type") == "Dangling"), None)
            if old is not None and (old.get("status"), old.get("reason"), old.get("message")) == wanted:
                return current
            since = old["lastTransitionTime"] if old is not None and old.get("status") == status and old.get("lastTransitionTime") else self.now()
            conditions = [c for c in conditions if c.get("type") != "Dangling"]
            conditions.append({"type": "Dangling", "status": status, "lastTransitionTime": since,
                               "reason": reason, "message": message})
            current["status"] = {**(current.get("status") or {}), "conditions": conditions}
            return current

        return mutate
