"""What the watch cache keeps of each object, and of each event.

:class:`CachedObject` is one object as the cache holds it: its JSON with its
``resourceVersion`` already set (encoded once, when the event arrives, and
then shared by every list and every watcher), plus the few values selectors
need (labels, selectable fields). Decoded dicts are not kept: they cost ~5x
their JSON size in memory.

:class:`CacheEvent` is one change as watchers see it: the new state and the
previous one (so a selector's transitions can be told), and the
``(type, bytes)`` items watchers queue, made once per event and shared by
every watcher (:meth:`CacheEvent.as_added` and friends): queues that hold the
very same items let the stream encode a frame once for all of them.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

import orjson

from k8py.apiserver.registry import ResourceDefinition

__all__ = ["CachedObject", "CacheEvent", "build_cached_object", "ADDED", "MODIFIED", "DELETED"]

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"


@dataclass(slots=True, eq=False)
class CachedObject:
    key: str
    namespace: str
    name: str
    rv: int
    data: bytes  # the object's JSON, resourceVersion included
    labels: dict[str, str]
    fields: dict[str, str]  # selectable field -> value (only non-empty ones)

    def field(self, path: str) -> str:
        return self.fields.get(path, "")

    def decode(self) -> dict[str, Any]:
        """A fresh dict (callers may mutate it)."""
        return orjson.loads(self.data)


@dataclass(slots=True, eq=False)
class CacheEvent:
    type: str  # ADDED / MODIFIED / DELETED
    rv: int
    obj: CachedObject  # new state; for DELETED the last state, rv = the delete's
    prev: CachedObject | None
    _prev_at_rv: bytes | None = field(default=None)
    # what watchers queue, made once per event and shared by all of them
    _added: tuple[str, bytes] | None = field(default=None)
    _same: tuple[str, bytes] | None = field(default=None)
    _left: tuple[str, bytes] | None = field(default=None)

    def prev_data_at_rv(self) -> bytes:
        """The previous state stamped with this event's RV: what a watcher
        whose selector stopped matching receives in its DELETED event."""
        if self._prev_at_rv is None:
            assert self.prev is not None
            obj = orjson.loads(self.prev.data)
            obj.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
            self._prev_at_rv = orjson.dumps(obj)
        return self._prev_at_rv

    def as_added(self) -> tuple[str, bytes]:
        """``(ADDED, new state)``: the object entered the selection."""
        if self._added is None:
            self._added = (ADDED, self.obj.data)
        return self._added

    def as_modified(self) -> tuple[str, bytes]:
        """``(MODIFIED, new state)``: it was and still is selected."""
        if self._same is None:
            self._same = (self.type, self.obj.data)
        return self._same

    def as_deleted(self) -> tuple[str, bytes]:
        """``(DELETED, last state)``: a selected object was deleted."""
        return self.as_modified()

    def as_left(self) -> tuple[str, bytes]:
        """``(DELETED, previous state at this RV)``: it left the selection."""
        if self._left is None:
            self._left = (DELETED, self.prev_data_at_rv())
        return self._left


_NO_LABELS: dict[str, str] = {}


def _intern(value: object) -> str:
    return sys.intern(value) if isinstance(value, str) else str(value)


def build_cached_object(definition: ResourceDefinition, key: str, value: bytes, rv: int) -> CachedObject:
    """Decode a stored value once, stamp its RV, and keep what selectors need."""
    obj = orjson.loads(value)
    meta = obj.get("metadata")
    if meta is None:
        meta = obj["metadata"] = {}
    meta["resourceVersion"] = str(rv)
    # selector values repeat across objects (phases, node names, label
    # values): interning them keeps one copy, a large share of the per-object
    # memory besides the JSON itself
    fields: dict[str, str] = {}
    for path, getter in definition.field_getters.items():
        v = getter(obj)
        if v:
            fields[path] = _intern(v)
    labels = meta.get("labels")
    return CachedObject(
        key=key,
        namespace=_intern(meta.get("namespace", "")) if definition.namespaced else "",
        name=meta.get("name", ""),
        rv=rv,
        data=orjson.dumps(obj),
        labels={_intern(k): _intern(v) for k, v in labels.items()} if labels else _NO_LABELS,
        fields=fields,
    )
