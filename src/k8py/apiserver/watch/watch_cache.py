"""The watch cache of one resource: current state plus a ring of recent events.

Fed by :class:`k8py.apiserver.watch.cacher.Cacher` (one store watch for all
resources), it serves every list and watch of its resource without touching
the store.

What is kept, per object, is a :class:`~k8py.apiserver.watch.cached_object.CachedObject`
(its JSON with its ``resourceVersion``, encoded once and shared by every list
and watcher, plus what selectors read).

Invariants:

- ``revision`` is the store revision the state reflects; it only increases.
- every event with ``rv > oldest_rv`` is in ``ring``, in order; a watch from
  an RV older than ``oldest_rv`` cannot be served (410 Expired).
- ``by_namespace[ns]`` and ``by_index[value]`` always hold exactly the keys
  of the live objects with that namespace / indexed field value.
- the cache never awaits: ``apply`` runs to completion on the event loop, so
  readers see either the state before an event or after it.

Fan-out is one-directional: ``apply`` offers the event to the watchers
indexed under it (any :class:`CacheWatcher`) and returns the ones that want
a flush; the caller (the cacher) flushes them once per store batch. A
watcher never reaches back into the cache or the cacher. Watchers
(:mod:`.watcher_index`) are indexed under the narrowest value their selection pins (object name,
indexed field, namespace), so an event visits only those that may care;
with a ``group_factory`` (the cacher gives one) watchers with equal
selections are indexed as one :class:`WatchGroup`, which decides each event
once for all of them (see ``watcher_group``).

Faults stay local. A stored value that cannot be decoded raises
:class:`UndecodableObject` from :meth:`WatchCache.apply` before anything
changes; the cacher logs and counts it and calls
:meth:`WatchCache.skip_undecodable`: a delete still removes the key, a
create or update leaves the last good state. A watcher whose ``offer`` raises is failed alone
(:meth:`Watcher.fail`: an ERROR event, then its stream ends); the other
watchers, and the rest of the batch, go on.
"""

from __future__ import annotations

import collections
import logging
from typing import Any, Callable, Iterable, Iterator

from k8py.apiserver.registry import ResourceDefinition
from k8py.apiserver.watch.cached_object import ADDED, DELETED, MODIFIED, CachedObject, CacheEvent, build_cached_object
from k8py.apiserver.watch.stored_hints import StoredHints
from k8py.apiserver.watch.watcher_index import CacheWatcher, WatcherIndex, WatchGroup
from k8py.storage import EventType, WatchEvent

__all__ = [
    "CachedObject", "CacheEvent", "CacheWatcher", "StoreRevision", "WatchCache", "WatchGroup", "TooOldResourceVersion", "UndecodableObject",
    "build_cached_object", "ADDED", "MODIFIED", "DELETED",
]

log = logging.getLogger(__name__)



class UndecodableObject(Exception):
    """A stored value the cache cannot decode (see the module docstring)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"stored value of {key} cannot be decoded")
        self.key = key


class TooOldResourceVersion(Exception):
    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(f"too old resource version: {requested} ({oldest})")
        self.requested = requested
        self.oldest = oldest



class StoreRevision:
    """The revision a store watch has delivered everything up to, shared by
    the caches it feeds: the cacher sets it once per batch, where it used to
    advance each of its ~50 caches one by one."""

    __slots__ = ("value",)

    def __init__(self, value: int = 0) -> None:
        self.value = value


class WatchCache:
    """Current state and recent history of one resource."""

    def __init__(self, definition: ResourceDefinition, *, capacity: int = 10_000,
                 group_factory: Callable[[Any], WatchGroup] | None = None,
                 store_revision: StoreRevision | None = None) -> None:
        self.definition = definition
        self.objects: dict[str, CachedObject] = {}
        self.by_namespace: dict[str, dict[str, CachedObject]] = {}
        self.index_field = definition.indexed_field
        self.by_index: dict[str, dict[str, CachedObject]] = {}
        self.ring: collections.deque[CacheEvent] = collections.deque(maxlen=max(capacity, 1))
        self.oldest_rv = 0
        #: what the store watch has delivered (the cache reflects at least that)
        self.store_revision = store_revision if store_revision is not None else StoreRevision()
        self._revision = 0
        #: who watches, indexed the same way as objects so an event only visits
        #: the watchers that could care about it (:mod:`.watcher_index`)
        self.watchers = WatcherIndex(self.index_field, group_factory, resource=definition.plural)

    # -- state ------------------------------------------------------------

    @property
    def revision(self) -> int:
        """The store revision the state reflects: the last event applied, or
        the store watch's (shared) revision once it has gone past it."""
        shared = self.store_revision.value
        return shared if shared > self._revision else self._revision

    @revision.setter
    def revision(self, value: int) -> None:
        self._revision = value

    @property
    def last_change(self) -> int:
        """The revision of the last event applied to this resource (or of its last reset):
        unlike :attr:`revision`, it moves only when this resource's objects may have changed."""
        return self._revision

    def reset(self, objects: Iterable[CachedObject], revision: int) -> None:
        """Replace the whole state (initial load or relist); history is lost."""
        self.objects = {}
        self.by_namespace = {}
        self.by_index = {}
        for obj in objects:
            self._put(obj)
        self.ring.clear()
        self.oldest_rv = revision
        self.revision = revision

    def set_definition(self, definition: ResourceDefinition) -> None:
        self.definition = definition
        self.index_field = self.watchers.index_field = definition.indexed_field

    def _put(self, obj: CachedObject) -> CachedObject | None:
        prev = self.objects.get(obj.key)
        if prev is not None:
            self._unindex(prev)
        self.objects[obj.key] = obj
        self.by_namespace.setdefault(obj.namespace, {})[obj.key] = obj
        if self.index_field:
            self.by_index.setdefault(obj.field(self.index_field), {})[obj.key] = obj
        return prev

    def _unindex(self, obj: CachedObject) -> None:
        ns = self.by_namespace.get(obj.namespace)
        if ns is not None:
            ns.pop(obj.key, None)
            if not ns:
                del self.by_namespace[obj.namespace]
        if self.index_field:
            value = obj.field(self.index_field)
            idx = self.by_index.get(value)
            if idx is not None:
                idx.pop(obj.key, None)
                if not idx:
                    del self.by_index[value]

    def apply(self, event: WatchEvent, hints: "StoredHints | None" = None) -> list[CacheWatcher]:
        """Apply one store event and offer it to the watchers it may concern;
        returns those that queued something to flush. Raises
        :class:`UndecodableObject` (with nothing changed) if the stored value
        cannot be decoded. ``hints``: what the write path noted of its
        values (a write of this server's own is then not decoded again)."""
        kv = event.kv
        cached = None if hints is None else hints.take(self.definition, event)
        if cached is None:
            try:
                cached = build_cached_object(self.definition, kv.key, kv.value, kv.mod_revision)
            except Exception as err:
                raise UndecodableObject(kv.key) from err
        if event.type is EventType.DELETE:
            prev = self.objects.pop(kv.key, None)
            if prev is not None:
                self._unindex(prev)
            cache_event = CacheEvent(DELETED, kv.mod_revision, cached, prev or cached)
        else:
            prev = self._put(cached)
            cache_event = CacheEvent(MODIFIED if prev is not None else ADDED, kv.mod_revision, cached, prev)
        if len(self.ring) == self.ring.maxlen:
            self.oldest_rv = self.ring[0].rv
        self.ring.append(cache_event)
        if kv.mod_revision > self._revision:
            self._revision = kv.mod_revision
        return self.watchers.dispatch(cache_event)

    def skip_undecodable(self, event: WatchEvent) -> list[CacheWatcher]:
        """Account for an event whose value :meth:`apply` could not decode: a
        delete still removes the key (watchers get the last good state), a
        create or update is skipped (the last good state stays)."""
        kv = event.kv
        if kv.mod_revision > self._revision:
            self._revision = kv.mod_revision
        if event.type is not EventType.DELETE:
            return []
        prev = self.objects.pop(kv.key, None)
        if prev is None:
            return []
        self._unindex(prev)
        cache_event = CacheEvent(DELETED, kv.mod_revision, prev, prev)
        if len(self.ring) == self.ring.maxlen:
            self.oldest_rv = self.ring[0].rv
        self.ring.append(cache_event)
        return self.watchers.dispatch(cache_event)

    def advance(self, revision: int) -> None:
        """The store has delivered everything up to ``revision`` (a cache of
        its own; the cacher's caches share theirs, see :class:`StoreRevision`)."""
        if revision > self._revision:
            self._revision = revision

    # -- reads ------------------------------------------------------------

    def candidates(self, namespace: str = "", index_value: str | None = None, name: str | None = None) -> Iterator[CachedObject]:
        """Objects that may match a query, narrowed by the name, the namespace
        and the indexed field when the query pins them (unsorted)."""
        if name is not None and (namespace or not self.definition.namespaced):
            obj = self.objects.get(self.definition.key(namespace, name))
            return iter(() if obj is None else (obj,))
        if index_value is not None and self.index_field:
            source = self.by_index.get(index_value, {}).values()
            if namespace:
                return (o for o in source if o.namespace == namespace)
            return iter(source)
        if namespace:
            return iter(self.by_namespace.get(namespace, {}).values())
        return iter(self.objects.values())

    def events_after(self, rv: int) -> list[CacheEvent]:
        """Every event with rv > ``rv``. Raises TooOldResourceVersion."""
        if rv < self.oldest_rv:
            # upstream reports the oldest RV a watch can still start from
            raise TooOldResourceVersion(rv, self.oldest_rv)
        if not self.ring or self.ring[-1].rv <= rv:
            return []
        # the ring is sorted by rv: scan from the end (resumes are usually recent)
        out: list[CacheEvent] = []
        for ev in reversed(self.ring):
            if ev.rv <= rv:
                break
            out.append(ev)
        out.reverse()
        return out

    # -- watchers (see :mod:`.watcher_index`) -------------------------------

    def add_watcher(self, watcher: CacheWatcher) -> None:
        """Register ``watcher`` for the events after the cache's revision."""
        self.watchers.add(watcher, self.revision)

    def remove_watcher(self, watcher: CacheWatcher) -> None:
        self.watchers.remove(watcher)

    def interested_watchers(self, namespace: str, name: str) -> int:
        """How many watchers a change of ``namespace``/``name`` may reach (APF's estimate)."""
        return self.watchers.interested(namespace, name)

    @property
    def watcher_count(self) -> int:
        return self.watchers.count

    def all_watchers(self) -> list[CacheWatcher]:
        """Every watcher registered (the members of groups, not the groups)."""
        return self.watchers.all()
