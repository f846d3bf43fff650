"""The cacher: one store watch feeding the watch cache of every resource.

Upstream runs one cacher per resource, each with its own etcd watch. k8py runs
a single watch over the whole ``/registry/`` prefix and routes each event to
its resource's :class:`~k8py.apiserver.watch.watch_cache.WatchCache` by key. One
watch means one ordered stream: every cache advances through the same
revisions, so a list of any resource can wait for "the cache has caught up with
the store's current revision" (a consistent read) with one number.

Keys map to resources as upstream lays them out: ``/registry/pods/ns/name`` →
``pods``; ``/registry/<group>/<plural>/...`` (a segment with a dot) →
``<group>/<plural>``, which is what ``ResourceDefinition.storage_key_resource``
gives.

Invariants:

- ``revision`` only increases; waiters are woken in revision order;
- while ``_lock`` is held no event is applied (used to load a resource
  registered at run time at exactly the cacher's revision);
- if the store watch breaks (compaction overtook it, the store failed over),
  every cache is reloaded and every watcher ended: clients re-watch and, if
  their RV is too old, get 410 and relist, as with upstream;
- a store watch that merely *lagged* (:class:`~k8py.storage.WatchLaggedError`:
  everything up to its revision was delivered) is resumed from there, with
  no reload and no watcher ended;
- watchers are flushed once per store batch, right after it is applied: one
  write per watcher per batch, frames encoded once for the watchers owed them;
- one bad thing never ends every watch: a watcher whose encoding or
  selectors fail gets an ERROR event and is closed alone (see the watch
  cache); a stored value that cannot be decoded is logged, counted in
  ``undecodable`` (and ``on_undecodable``) and skipped, in the watch and in
  (re)loads alike, so a reload cannot loop on it.

Consistent reads (``wait_for_store_revision``): the caller reads the store's
current revision, then waits for the cache to reach it. The one watch only
hears of revisions under ``/registry/``; on etcd the newest revision often
belongs to another prefix, so the cache learns it has caught up only from a
progress notification. The store is asked for one (``Storage.request_progress``)
when the cache is behind, as upstream's cacher asks etcd (KEP-2340); if that
fails the wait lasts until the next periodic notification. The outcomes are
counted in ``caught_up`` / ``fell_behind``.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from typing import Any, Callable, Iterator

from k8py.apiserver.registry import REGISTRY_PREFIX, Registry, ResourceDefinition
from k8py.apiserver.watch.watch_cache import (
    CachedObject, CacheWatcher, StoreRevision, UndecodableObject, WatchCache, build_cached_object,
)
from k8py.apiserver.watch.clock import LoopClock, WatchClock
from k8py.apiserver.watch.liveness import LivenessSweep
from k8py.apiserver.watch.watcher import WatchLimits
from k8py.apiserver.watch.stored_hints import StoredHints
from k8py.apiserver.watch.watcher_group import WatcherGroup
from k8py.storage import CompactedError, KeyValue, Storage, StorageError, WatchBatch, WatchLaggedError

__all__ = ["Cacher", "resource_of_key"]

log = logging.getLogger(__name__)


def resource_of_key(key: str) -> str:
    """``pods`` for /registry/pods/ns/x; ``example.com/widgets`` for
    /registry/example.com/widgets/ns/x."""
    rest = key[len(REGISTRY_PREFIX) :]
    first, _, tail = rest.partition("/")
    if "." in first:
        second = tail.partition("/")[0]
        return f"{first}/{second}"
    return first


class Cacher:
    def __init__(
        self,
        storage: Storage,
        registry: Registry,
        *,
        capacity: int = 10_000,
        on_event: Callable[[str], None] | None = None,
        watch_limits: WatchLimits | None = None,
        on_undecodable: Callable[[str], None] | None = None,
        clock: WatchClock | None = None,
    ) -> None:
        self.storage = storage
        self.registry = registry
        self.capacity = capacity
        self.caches: dict[str, WatchCache] = {}
        self.revision = 0
        #: ``revision`` as every cache reads it (set with it)
        self._store_revision = StoreRevision()
        self.ready = asyncio.Event()
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        #: run-time registrations whose cache is still loading, by storage resource
        self._loading: dict[str, asyncio.Task[None]] = {}
        self._on_event = on_event
        #: what the object store notes of the values it writes (see stored_hints):
        #: the server wires ``hints.note`` into its object store
        self.hints = StoredHints()
        self._on_undecodable = on_undecodable
        #: stored values skipped because they could not be decoded
        self.undecodable = 0
        #: how far a watch client may fall behind (used by every watch stream)
        self.watch_limits = watch_limits if watch_limits is not None else WatchLimits()
        #: the clock watch streams keep time by (bookmarks, timeoutSeconds, slow clients)
        self.clock: WatchClock = clock if clock is not None else LoopClock()
        #: wakes the idle watch streams whose client has gone (one timer for all)
        self.liveness = LivenessSweep(self.clock)
        # consistent reads: confirmed from the cache in time / not
        self.caught_up = 0
        self.fell_behind = 0
        registry.on_change(self._on_definition)
        registry.on_remove(self._on_removed)

    # -- lifecycle ----------------------------------------------------------

    async def start(self) -> None:
        for definition in self.registry:
            self._ensure_cache(definition)
        await self._load()
        self._task = asyncio.create_task(self._run(), name="cacher-watch")

    async def close(self) -> None:
        """Stop the store watch and end every watch. A cancellation of the
        caller while the watch task winds down propagates (it is not the
        watch task's own CancelledError, which ``asyncio.wait`` leaves alone)."""
        task, self._task = self._task, None
        try:
            if task is not None:
                task.cancel()
                await asyncio.wait([task])
        finally:
            for cache in self.caches.values():
                for watcher in cache.all_watchers():
                    watcher.terminate()

    def _ensure_cache(self, definition: ResourceDefinition) -> WatchCache:
        name = definition.storage_key_resource
        cache = self.caches.get(name)
        if cache is None:
            # a view (converter set) shares its stored kind's cache; the
            # stored kind re-sets the definition when it registers
            cache = WatchCache(definition, capacity=self.capacity, group_factory=WatcherGroup,
                               store_revision=self._store_revision)
            cache.revision = cache.oldest_rv = self.revision
            self.caches[name] = cache
        elif definition.converter is None or getattr(definition.converter, "reads_stored_form", False):
            cache.set_definition(definition)  # the cache holds the stored form
        return cache

    def cache_for(self, definition: ResourceDefinition) -> WatchCache:
        return self._ensure_cache(definition)

    def current(self, definition: ResourceDefinition, key: str) -> tuple[bytes, int] | None:
        """The cached copy of ``key`` as (JSON with its resourceVersion,
        revision); None if the cache is not loaded or has no such object.
        It may be behind the store: a guess for a guarded write, not a read."""
        cache = self.caches.get(definition.storage_key_resource)
        if cache is None or not self.ready.is_set() or definition.storage_key_resource in self._loading:
            return None
        obj = cache.objects.get(key)
        return None if obj is None else (obj.data, obj.rv)

    def _on_definition(self, definition: ResourceDefinition) -> None:
        if definition.storage_key_resource in self.caches or self._task is None:
            self._ensure_cache(definition)
            return
        # registered at run time: load what the store already holds for it at
        # exactly our revision, with the event stream paused
        task = asyncio.get_running_loop().create_task(
            self._load_one(definition), name=f"cacher-load-{definition.plural}"
        )
        self._loading[definition.storage_key_resource] = task
        task.add_done_callback(lambda t, name=definition.storage_key_resource: self._loading.pop(name, None)
                               if self._loading.get(name) is t else None)

    async def loaded(self, definition: ResourceDefinition) -> None:
        """Returns once a definition registered at run time has its cache
        loaded (at once for one already loaded)."""
        task = self._loading.get(definition.storage_key_resource)
        if task is not None:
            await asyncio.shield(task)

    def _on_removed(self, definition: ResourceDefinition) -> None:
        """A resource no longer served (a deleted CRD): its watches end and
        its cache goes, unless another served definition shares the storage."""
        name = definition.storage_key_resource
        if any(d.storage_key_resource == name for d in self.registry):
            return
        cache = self.caches.pop(name, None)
        if cache is not None:
            for watcher in cache.all_watchers():
                watcher.terminate()

    async def _load_one(self, definition: ResourceDefinition) -> None:
        async with self._lock:
            cache = self._ensure_cache(definition)
            result = await self.storage.list(definition.key_prefix, revision=self.revision or 0)
            cache.reset(self._decode_all(definition, result.kvs), self.revision)

    async def _load(self) -> None:
        """(Re)load every cache from one list of the whole prefix."""
        result = await self.storage.list(REGISTRY_PREFIX)
        grouped: dict[str, list] = {name: [] for name in self.caches}
        for kv in result.kvs:
            grouped.setdefault(resource_of_key(kv.key), []).append(kv)
        for name, kvs in grouped.items():
            cache = self.caches.get(name)
            if cache is None:
                continue  # no definition yet: loaded when one is registered
            cache.reset(self._decode_all(cache.definition, kvs), result.revision)
        self.revision = self._store_revision.value = result.revision
        self.ready.set()
        self._wake_waiters()

    def _decode_all(self, definition: ResourceDefinition, kvs: list[KeyValue]) -> Iterator[CachedObject]:
        for kv in kvs:
            try:
                yield build_cached_object(definition, kv.key, kv.value, kv.mod_revision)
            except Exception:
                self._count_undecodable(definition, kv.key)

    def _count_undecodable(self, definition: ResourceDefinition, key: str) -> None:
        self.undecodable += 1
        log.error("stored object cannot be decoded; skipped", extra={"key": key, "resource": definition.plural}, exc_info=True)
        if self._on_undecodable is not None:
            self._on_undecodable(definition.plural)

    async def _run(self) -> None:
        while True:
            try:
                async for batch in self.storage.watch(REGISTRY_PREFIX, after=self.revision):
                    async with self._lock:
                        self._apply(batch)
            except asyncio.CancelledError:
                raise
            except WatchLaggedError as err:
                # everything up to err.revision was delivered and applied: go on from there
                log.warning("cacher watch lagged; resuming", extra={"revision": err.revision, "cache_revision": self.revision})
                continue
            except CompactedError as err:
                log.warning("cacher watch expired; reloading caches", extra={"error": str(err)})
            except StorageError as err:
                log.warning("cacher watch failed; reloading caches", extra={"error": str(err)})
                await asyncio.sleep(0.5)
            except Exception:  # a bug must not stop the cache for good
                log.exception("cacher watch crashed; reloading caches")
                await asyncio.sleep(0.5)
            else:
                return  # the store closed
            await self._reload()

    async def _reload(self) -> None:
        async with self._lock:
            for cache in self.caches.values():
                for watcher in cache.all_watchers():
                    watcher.terminate()
            while True:
                try:
                    await self._load()
                    return
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("cacher reload failed; retrying")
                    await asyncio.sleep(1.0)

    def _apply(self, batch: WatchBatch) -> None:
        # watchers (and groups) with events queued by this batch: flushed once, after it
        touched: set[CacheWatcher] = set()
        for event in batch.events:
            cache = self.caches.get(resource_of_key(event.kv.key))
            if cache is None:
                continue
            try:
                touched.update(cache.apply(event, self.hints))
            except UndecodableObject:
                self._count_undecodable(cache.definition, event.kv.key)
                touched.update(cache.skip_undecodable(event))
                continue
            if self._on_event is not None:
                self._on_event(cache.definition.plural)
        if batch.revision > self.revision:
            self.revision = self._store_revision.value = batch.revision  # every cache has reached it
        self._flush(touched)
        self._wake_waiters()

    @staticmethod
    def _flush(touched: set[CacheWatcher]) -> None:
        """One write per watcher for everything the batch brought it; the
        encoded frames are shared by the watchers owed the same events (one
        encoding, not one per watcher). Done at once, not on the loop's next
        turn: with one watcher per event (a kubelet's pods, a one-object
        watch) the extra turn of the loop per batch cost more than what
        coalescing batches saved."""
        frames: dict[Any, bytes] = {}
        for watcher in touched:
            watcher.flush(frames)

    # -- consistent reads ---------------------------------------------------

    def _wake_waiters(self) -> None:
        while self._waiters and self._waiters[0][0] <= self.revision:
            _, _, fut = heapq.heappop(self._waiters)
            if not fut.done():
                fut.set_result(None)

    async def wait_for_revision(self, revision: int, *, timeout: float) -> bool:
        """Wait until the caches reflect ``revision``; False on timeout."""
        if self.revision >= revision:
            return True
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (revision, next(self._seq), fut))
        try:
            await asyncio.wait_for(fut, timeout)
            return True
        except asyncio.TimeoutError:
            return False

    async def wait_for_store_revision(self, current: int, *, timeout: float) -> bool:
        """Wait until the caches reflect ``current``, a revision just read from
        the store (a consistent read), asking the store for a progress
        notification if the caches are behind and the store can. False if
        that took longer than ``timeout``."""
        if self.revision >= current:
            self.caught_up += 1
            return True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            async with asyncio.timeout(timeout):
                await self.storage.request_progress()
        except TimeoutError:
            pass  # the wait below sees the deadline
        except StorageError as err:
            # the periodic notifications (or the caller's store read) remain
            log.info("progress request failed", extra={"error": str(err)})
        reached = await self.wait_for_revision(current, timeout=max(deadline - loop.time(), 0.0))
        if reached:
            self.caught_up += 1
        else:
            self.fell_behind += 1
        return reached

    async def wait_consistent(self, *, timeout: float = 3.0) -> bool:
        """Wait until the caches have caught up with the store's current
        revision (a consistent read). False if that took longer than ``timeout``."""
        current = await self.storage.current_revision()
        return await self.wait_for_store_revision(current, timeout=timeout)
