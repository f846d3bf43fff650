"""Our own EndpointSlice writes that the informer has not shown yet
(upstream ``EndpointSliceTracker``).

A controller that creates a slice and syncs the same Service again before
its informer delivers the new slice would otherwise create it twice, and
one that deletes a slice would see it again. :meth:`existing` overlays the
cache with what this controller wrote: a slice it created or updated is
taken as written until the cache shows that resourceVersion (or a later
one); a slice it deleted is left out until the cache drops it too.

Entries go away as soon as the cache catches up, so the tracker stays as
small as the number of writes in flight.
"""

from __future__ import annotations

from typing import Any, Mapping

from k8py.controllers.endpointslice_reconciler import MANAGED_BY, SERVICE_NAME

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
