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
watcher never reaches back into the cache or the cacher. Watchers are
indexed under the narrowest value their selection pins (object name,
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
from typing import Any, Callable, Iterable, Iterator, Protocol

from k8py.apiserver.registry import ResourceDefinition
from k8py.apiserver.watch.cached_object import ADDED, DELETED, MODIFIED, CachedObject, CacheEvent, build_cached_object
from k8py.apiserver.watch.stored_hints import StoredHints
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



class WatchGroup(Protocol):
    """What the cache needs of a group of watchers with one selection
    (:class:`k8py.apiserver.watch.watcher_group.WatcherGroup`): a
    :class:`CacheWatcher` itself, plus membership."""

    members: Any

    def join(self, watcher: Any, revision: int) -> None:
        """Add a watcher whose start covers everything up to ``revision``."""

    def leave(self, watcher: Any) -> None:
        """Remove a watcher."""

    # and the CacheWatcher protocol (offer, flush, terminate, fail, indexes)
    namespace: str
    index_value: str | None
    name_value: str | None

    def offer(self, event: "CacheEvent", decisions: dict[Any, Any] | None = None) -> bool: ...

    def flush(self, frames: dict[Any, bytes] | None = None) -> None: ...

    def terminate(self) -> None: ...

    def fail(self, reason: str) -> None: ...


class CacheWatcher(Protocol):
    """What the cache needs of a watcher (:class:`k8py.apiserver.watch.watcher.Watcher`)."""

    @property
    def namespace(self) -> str:
        """The namespace it is indexed under ("" = every namespace)."""

    @property
    def index_value(self) -> str | None:
        """The indexed field's value it is indexed under (None = not pinned)."""

    @property
    def name_value(self) -> str | None:
        """The one object name it watches (``metadata.name=X``; None = any)."""

    def offer(self, event: CacheEvent, decisions: dict[Any, Any] | None = None) -> bool:
        """Take the event if it concerns the watcher; never awaits. True when
        the watcher queued something to be flushed after the batch.
        ``decisions`` is one memo per event, shared by every watcher it is
        offered to (watchers with equal selections decide once)."""

    def flush(self, frames: dict[Any, bytes] | None = None) -> None:
        """Write what was queued by the batches just applied; ``frames`` is
        shared by the watchers flushed together (one encoding per frame)."""

    def terminate(self) -> None:
        """End the watch (its client re-watches)."""

    def fail(self, reason: str) -> None:
        """End the watch with an ERROR event carrying ``reason``."""



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
        # watchers, indexed the same way as objects so an event only visits
        # the watchers that could care about it
        self.watchers_all: set[CacheWatcher] = set()
        self.watchers_by_ns: dict[str, set[CacheWatcher]] = {}
        self.watchers_by_index: dict[str, set[CacheWatcher]] = {}
        #: one-object watches (metadata.name=X: kube-proxy's and a kubelet's
        #: Node, a leader's Lease), by name: thousands of them must not each
        #: be tested against every event
        self.watchers_by_name: dict[str, set[CacheWatcher]] = {}
        #: watchers with equal selections are indexed as one group (by their
        #: shared selection token) when a factory is given; see watcher_group
        self.group_factory = group_factory
        self.groups: dict[Any, WatchGroup] = {}
        # watchers (not groups) registered per index place, counted rather
        # than summed: thousands of kubelets each watch their node's pods
        self._counts: dict[tuple[str, str], int] = {}

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
        self.index_field = definition.indexed_field

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
        return self._dispatch(cache_event)

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
        return self._dispatch(cache_event)

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

    # -- watchers ---------------------------------------------------------

    def add_watcher(self, watcher: CacheWatcher) -> None:
        """Register ``watcher`` for the events after the cache's revision: in
        the group of its selection (when grouping and its selection is
        known), else alone, indexed under the narrowest thing its selection
        pins (a name, the indexed field, a namespace, or nothing): an event
        is then offered only to what is indexed under its object's values."""
        token = getattr(watcher, "selection", None)
        if self.group_factory is not None and token is not None and token.key is not None:
            group = self.groups.get(token)
            if group is None:
                group = self.groups[token] = self.group_factory(watcher)
                self._index(group)
            if watcher not in group.members:
                group.join(watcher, self.revision)
                self._count(watcher, 1)
            return
        if self._index(watcher):
            self._count(watcher, 1)

    def remove_watcher(self, watcher: CacheWatcher) -> None:
        token = getattr(watcher, "selection", None)
        group = self.groups.get(token) if token is not None else None
        if group is not None and watcher in group.members:
            group.leave(watcher)
            self._count(watcher, -1)
            if not group.members:
                del self.groups[token]
                self._unindex_watcher(group)
            return
        if self._unindex_watcher(watcher):
            self._count(watcher, -1)

    def _place(self, watcher: CacheWatcher) -> tuple[str, str]:
        if watcher.name_value is not None:
            return ("name", watcher.name_value)
        if watcher.index_value is not None and self.index_field:
            return ("index", "")  # every indexed watcher may be reached (APF counts them all)
        if watcher.namespace:
            return ("ns", watcher.namespace)
        return ("all", "")

    def _count(self, watcher: CacheWatcher, delta: int) -> None:
        place = self._place(watcher)
        n = self._counts.get(place, 0) + delta
        if n:
            self._counts[place] = n
        else:
            self._counts.pop(place, None)

    def interested_watchers(self, namespace: str, name: str) -> int:
        """How many watchers a change of ``namespace``/``name`` may reach, as upstream's watch
        tracker counts them for APF: those of the whole resource (with any field selector),
        of the namespace, and of the name (an overestimate: selectors are not applied)."""
        counts = self._counts
        count = counts.get(("all", ""), 0) + counts.get(("index", ""), 0)
        if namespace:
            count += counts.get(("ns", namespace), 0)
        if name:
            count += counts.get(("name", name), 0)
        return count

    def _index(self, watcher: CacheWatcher) -> bool:
        """Index ``watcher`` (alone or a group); False if it already was."""
        if watcher.name_value is not None:
            table = self.watchers_by_name.setdefault(watcher.name_value, set())
        elif watcher.index_value is not None and self.index_field:
            table = self.watchers_by_index.setdefault(watcher.index_value, set())
        elif watcher.namespace:
            table = self.watchers_by_ns.setdefault(watcher.namespace, set())
        else:
            table = self.watchers_all
        if watcher in table:
            return False
        table.add(watcher)
        return True

    def _unindex_watcher(self, watcher: CacheWatcher) -> bool:
        """Take ``watcher`` out of the indexes; False if it was not in them."""
        if watcher in self.watchers_all:
            self.watchers_all.discard(watcher)
            return True
        for table, key in (
            (self.watchers_by_name, watcher.name_value),
            (self.watchers_by_index, watcher.index_value),
            (self.watchers_by_ns, watcher.namespace),
        ):
            if key is None:
                continue
            group = table.get(key)
            if group is not None and watcher in group:
                group.discard(watcher)
                if not group:
                    del table[key]
                return True
        return False

    def _indexed(self) -> Iterator[CacheWatcher]:
        yield from self.watchers_all
        for table in (self.watchers_by_ns, self.watchers_by_index, self.watchers_by_name):
            for group in table.values():
                yield from group

    @property
    def watcher_count(self) -> int:
        return len(self.all_watchers())

    def _dispatch(self, event: CacheEvent) -> list[CacheWatcher]:
        targets: list[set[CacheWatcher]] = []
        if self.watchers_all:
            targets.append(self.watchers_all)
        ns = event.obj.namespace
        if ns in self.watchers_by_ns:
            targets.append(self.watchers_by_ns[ns])
        if self.watchers_by_index and self.index_field:
            new_value = event.obj.field(self.index_field)
            group = self.watchers_by_index.get(new_value)
            if group:
                targets.append(group)
            if event.prev is not None:
                old_value = event.prev.field(self.index_field)
                if old_value != new_value:
                    group = self.watchers_by_index.get(old_value)
                    if group:
                        targets.append(group)
        if self.watchers_by_name:
            group = self.watchers_by_name.get(event.obj.name)  # a name never changes
            if group:
                targets.append(group)
        touched: list[CacheWatcher] = []
        # watchers with equal selections decide once per event (see watcher)
        decisions: dict[Any, Any] = {}
        for group in targets:
            for watcher in list(group):
                try:
                    if watcher.offer(event, decisions):
                        touched.append(watcher)
                except Exception as err:  # this watcher's selectors or encoding: fail it alone
                    log.exception("watcher failed on an event; closing it", extra={"resource": self.definition.plural, "key": event.obj.key})
                    watcher.fail(f"unable to process the watch event for {event.obj.key}: {err!r}")
        return touched

    def all_watchers(self) -> list[CacheWatcher]:
        """Every watcher registered (the members of groups, not the groups)."""
        groups = {id(g) for g in self.groups.values()}
        out: list[CacheWatcher] = []
        for w in self._indexed():
            if id(w) in groups:
                out.extend(w.members)
            else:
                out.append(w)
        return out
