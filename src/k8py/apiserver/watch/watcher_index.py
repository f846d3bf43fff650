"""Who watches one resource: its watchers, indexed so that an event visits only those that may care.

A :class:`WatcherIndex` belongs to one :class:`~.watch_cache.WatchCache`. Watchers are indexed
under the narrowest value their selection pins: the object name (``metadata.name=X``: kube-proxy's
and a kubelet's Node, a leader's Lease: thousands of them must not each be tested against every
event), the resource's indexed field (a kubelet's ``spec.nodeName``), the namespace, or nothing.
With a ``group_factory`` (the cacher gives one) watchers with equal selections are indexed as one
:class:`WatchGroup`, which decides each event once for all of them (see ``watcher_group``).

Invariants: a watcher (or group) is in exactly one table while registered; ``_counts`` holds,
per index place, how many watchers (not groups) are registered there, for APF's estimate of
how many watchers a write reaches; a watcher whose ``offer`` raises is failed alone.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Iterator, Protocol

from k8py.apiserver.watch.cached_object import CacheEvent

__all__ = ["CacheWatcher", "WatchGroup", "WatcherIndex"]

log = logging.getLogger(__name__)


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


class WatcherIndex:
    """The watchers of one resource (see the module docstring)."""

    def __init__(self, index_field: str | None, group_factory: Callable[[Any], WatchGroup] | None = None,
                 *, resource: str = "") -> None:
        #: the resource's indexed field (the cache updates it with its definition)
        self.index_field = index_field
        self.resource = resource
        self.everything: set[CacheWatcher] = set()
        self.by_namespace: dict[str, set[CacheWatcher]] = {}
        self.by_index: dict[str, set[CacheWatcher]] = {}
        self.by_name: dict[str, set[CacheWatcher]] = {}
        self.group_factory = group_factory
        self.groups: dict[Any, WatchGroup] = {}
        # watchers (not groups) registered per index place, counted rather
        # than summed: thousands of kubelets each watch their node's pods
        self._counts: dict[tuple[str, str], int] = {}

    def add(self, watcher: CacheWatcher, revision: int) -> None:
        """Register ``watcher`` for the events after ``revision`` (the cache's): in
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
                group.join(watcher, revision)
                self._count(watcher, 1)
            return
        if self._index(watcher):
            self._count(watcher, 1)

    def remove(self, watcher: CacheWatcher) -> None:
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

    def interested(self, namespace: str, name: str) -> int:
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
            table = self.by_name.setdefault(watcher.name_value, set())
        elif watcher.index_value is not None and self.index_field:
            table = self.by_index.setdefault(watcher.index_value, set())
        elif watcher.namespace:
            table = self.by_namespace.setdefault(watcher.namespace, set())
        else:
            table = self.everything
        if watcher in table:
            return False
        table.add(watcher)
        return True

    def _unindex_watcher(self, watcher: CacheWatcher) -> bool:
        """Take ``watcher`` out of the indexes; False if it was not in them."""
        if watcher in self.everything:
            self.everything.discard(watcher)
            return True
        for table, key in (
            (self.by_name, watcher.name_value),
            (self.by_index, watcher.index_value),
            (self.by_namespace, watcher.namespace),
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
        yield from self.everything
        for table in (self.by_namespace, self.by_index, self.by_name):
            for group in table.values():
                yield from group

    @property
    def count(self) -> int:
        return len(self.all())

    def dispatch(self, event: CacheEvent) -> list[CacheWatcher]:
        """Offer ``event`` to the watchers indexed under its object's values; those that queued a flush."""
        targets: list[set[CacheWatcher]] = []
        if self.everything:
            targets.append(self.everything)
        ns = event.obj.namespace
        if ns in self.by_namespace:
            targets.append(self.by_namespace[ns])
        if self.by_index and self.index_field:
            new_value = event.obj.field(self.index_field)
            group = self.by_index.get(new_value)
            if group:
                targets.append(group)
            if event.prev is not None:
                old_value = event.prev.field(self.index_field)
                if old_value != new_value:
                    group = self.by_index.get(old_value)
                    if group:
                        targets.append(group)
        if self.by_name:
            group = self.by_name.get(event.obj.name)  # a name never changes
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
                    log.exception("watcher failed on an event; closing it", extra={"resource": self.resource, "key": event.obj.key})
                    watcher.fail(f"unable to process the watch event for {event.obj.key}: {err!r}")
        return touched

    def all(self) -> list[CacheWatcher]:
        """Every watcher registered (the members of groups, not the groups)."""
        groups = {id(g) for g in self.groups.values()}
        out: list[CacheWatcher] = []
        for w in self._indexed():
            if id(w) in groups:
                out.extend(w.members)
            else:
                out.append(w)
        return out
