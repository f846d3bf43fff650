"""Our own EndpointSlice writes that the informer has not shown yet
(upstream ``EndpointSliceTracker``).

A controller that creates a slice and syncs the same Service again before
its informer delivers the new slice would otherwise create it twice, and
one that deletes a slice would see it again. :meth:`existing` overlays the
cache with what this controller wrote: a slice it created or updated is
taken as written until the cache shows that resourceVersion (or a later
one); a slice it deleted is left out until the cache drops it too.

Entries go away as soon as the cache catches up, so the tracker stays as
small as the number of writes in flight. Because every write must be
recorded here, the tracker is also what carries out a
:class:`~k8py.controllers.endpointslice_reconciler.Plan`
(:meth:`SliceTracker.carry_out`) and deletes slices (:meth:`SliceTracker.delete`)
for both slice controllers.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from k8py.api.errors import NotFound
from k8py.client.resources import ENDPOINT_SLICES
from k8py.controllers.endpointslice_reconciler import MANAGED_BY, SERVICE_NAME, Plan, slice_body
from k8py.controllers.keyed_controller import unwrap_tombstone

__all__ = ["SliceTracker"]


def _rv(obj: Mapping[str, Any]) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace')}/{(meta.get('labels') or {}).get(SERVICE_NAME)}"


class SliceTracker:
    def __init__(self, lister: Any, managed_by: str) -> None:
        self.lister = lister
        self.managed_by = managed_by
        self._written: dict[str, dict[str, Mapping[str, Any] | None]] = {}

    def existing(self, namespace: str, service: str) -> list[Mapping[str, Any]]:
        cached = {(s.get("metadata") or {}).get("name"): s for s in self.lister.list(
            f"{SERVICE_NAME}={service},{MANAGED_BY}={self.managed_by}", namespace=namespace)}
        written = self._written.get(f"{namespace}/{service}", {})
        for name, mine in list(written.items()):
            seen = cached.get(name)
            if mine is None:
                if seen is None:
                    del written[name]
                else:
                    del cached[name]
            elif seen is not None and _rv(seen) >= _rv(mine):
                del written[name]
            else:
                cached[name] = mine
        if not written:
            self._written.pop(f"{namespace}/{service}", None)
        return list(cached.values())

    def wrote(self, obj: Mapping[str, Any]) -> None:
        self._written.setdefault(_key(obj), {})[(obj.get("metadata") or {}).get("name", "")] = obj

    def deleted(self, obj: Mapping[str, Any]) -> None:
        self._written.setdefault(_key(obj), {})[(obj.get("metadata") or {}).get("name", "")] = None

    def enqueue_on_slice_events(self, slices_informer: Any, enqueue: Callable[[str], None]) -> None:
        """Queue the Service of any slice this controller manages that changes or goes."""

        def changed(obj: Any) -> None:
            slc = unwrap_tombstone(obj)
            if slc is None:
                return
            meta = slc.get("metadata") or {}
            labels = meta.get("labels") or {}
            if labels.get(MANAGED_BY) == self.managed_by and labels.get(SERVICE_NAME):
                enqueue(f"{meta.get('namespace')}/{labels[SERVICE_NAME]}")

        slices_informer.add_event_handler(on_add=changed, on_update=lambda old, new: changed(new), on_delete=changed)

    async def carry_out(self, client: Any, actions: Plan, *, namespace: str, service_name: str,
                        labels: dict[str, str], owner_ref: dict[str, Any] | None) -> None:
        """Write the plan's creates, updates and deletes, recording each."""
        for ports, endpoints in actions.create:
            body = slice_body(namespace=namespace, service_name=service_name, labels=labels, owner_ref=owner_ref,
                              ports=ports, endpoints=endpoints)
            try:
                created = await client.create(ENDPOINT_SLICES, body, namespace=namespace)
            except NotFound:
                return  # the namespace is going away
            self.wrote(created)
        for slc, ports, endpoints in actions.update:
            body = slice_body(namespace=namespace, service_name=service_name, labels=labels, owner_ref=owner_ref,
                              ports=ports, endpoints=endpoints, existing=slc)
            try:
                updated = await client.update(ENDPOINT_SLICES, body)
            except NotFound:
                self.deleted(slc)
                raise  # gone under us: the sync is retried and looks again
            self.wrote(updated)
        for slc in actions.delete:
            await self.delete(client, slc)

    async def delete(self, client: Any, slc: Mapping[str, Any]) -> None:
        meta = slc.get("metadata") or {}
        try:
            await client.delete(ENDPOINT_SLICES, meta.get("namespace"), meta.get("name"))
        except NotFound:
            pass
        self.deleted(slc)
