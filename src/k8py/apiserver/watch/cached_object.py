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

__all__ = ["CachedObject", "CacheEvent", "build_cached_object", "interned_labels", "read_fields", "ADDED", "MODIFIED", "DELETED"]

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


NO_LABELS: dict[str, str] = {}
_intern = sys.intern


def _as_field(value: object) -> str:
    """A selectable field's value as ``path_getter`` gives it ('' when absent)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class _FieldPlan:
    """How to read a definition's selectable fields from a decoded object in
    one pass: the getters made by ``path_getter`` (they say their ``path``)
    grouped by their first key, so ``spec`` and ``status`` are looked up once
    for all of a pod's eight fields; any other getter is called as is. Gives
    exactly what calling each getter gives (the cache's per-event cost: eight
    getter calls were a fifth of an event's decode)."""

    __slots__ = ("getters", "groups", "others")

    def __init__(self, getters: Any) -> None:
        self.getters = getters  # kept alive: plans are found by its identity
        groups: dict[str, tuple[list[tuple[str, str]], list[tuple[str, tuple[str, ...]]]]] = {}
        self.others: list[tuple[str, Any]] = []
        for field_path, getter in getters.items():
            path = getattr(getter, "path", None)
            if path:
                singles, deeper = groups.setdefault(path[0], ([], []))
                if len(path) == 2:  # spec.nodeName: one lookup in the group's dict
                    singles.append((field_path, path[1]))
                else:
                    deeper.append((field_path, tuple(path[1:])))
            else:
                self.others.append((field_path, getter))
        self.groups = [(first, tuple(singles), tuple(deeper)) for first, (singles, deeper) in groups.items()]

    def read(self, obj: dict[str, Any]) -> dict[str, str]:
        fields: dict[str, str] = {}
        for first, singles, deeper in self.groups:
            top = obj.get(first)
            if top is None:
                continue
            if type(top) is dict:
                get = top.get
                for field_path, key in singles:
                    value = get(key)
                    if value is None:
                        continue
                    if type(value) is not str:
                        value = _as_field(value)
                    if value:
                        fields[field_path] = _intern(value)
            for field_path, rest in deeper:
                cur: Any = top
                for part in rest:
                    if type(cur) is not dict:
                        cur = None
                        break
                    cur = cur.get(part)
                    if cur is None:
                        break
                if cur is None:
                    continue
                value = cur if type(cur) is str else _as_field(cur)
                if value:
                    fields[field_path] = _intern(value)
        for field_path, getter in self.others:
            v = getter(obj)
            if v:
                fields[field_path] = _intern(v) if isinstance(v, str) else str(v)
        return fields


#: plans by the identity of a definition's getters mapping (shared by the
#: definitions of one kind); a handful of entries, one per served kind
_plans: dict[int, _FieldPlan] = {}


def read_fields(getters: Any, obj: dict[str, Any]) -> dict[str, str]:
    """The non-empty selectable fields of ``obj`` (interned) as ``getters`` give them."""
    plan = _plans.get(id(getters))
    if plan is None or plan.getters is not getters:
        plan = _plans[id(getters)] = _FieldPlan(getters)
    return plan.read(obj)


def interned_labels(labels: dict[Any, Any]) -> dict[str, str]:
    try:
        return {_intern(k): _intern(v) for k, v in labels.items()}
    except TypeError:  # a value that is not a string (validation refuses them; stored data may differ)
        return {_intern(str(k)): _intern(str(v)) for k, v in labels.items()}


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
    getters = definition.field_getters
    labels = meta.get("labels")
    namespace = meta.get("namespace", "") if definition.namespaced else ""
    return CachedObject(
        key=key,
        namespace=_intern(namespace) if type(namespace) is str else str(namespace),
        name=meta.get("name", ""),
        rv=rv,
        data=orjson.dumps(obj),
        labels=interned_labels(labels) if labels else NO_LABELS,
        fields=read_fields(getters, obj) if getters else {},
    )
