"""DeltaFIFO: the queue between a reflector and an informer, as client-go's.

A reflector (the producer) turns list and watch results into ``add``,
``update``, ``delete`` and ``replace`` calls; an informer (the consumer) calls
``pop`` and applies each key's accumulated :class:`Delta` list to its
:class:`~k8py.client.indexer.Indexer` and handlers. The FIFO guarantees:

- every change is delivered at most once, and a consumer sees *everything*
  that happened to a key since it last popped it, oldest first;
- a key is in the queue iff it has deltas (``_queue`` and ``_items`` agree);
  keys pop in the order they were first queued;
- two consecutive ``Deleted`` deltas collapse into one, keeping the one that
  knows more (a real final state beats a :class:`DeletedFinalStateUnknown`);
- ``replace(objects, rv)`` (a re-list) queues ``Replaced`` (or ``Sync``, when
  ``emit_delta_type_replaced`` is false) for every listed object, and a
  ``Deleted`` tombstone for every key that is queued or known to
  ``known_objects`` but absent from the list: deletions missed while the
  watch was down;
- an object whose key or transform fails is refused: ``add``/``update``/
  ``delete`` raise and queue nothing; ``replace`` queues every other object,
  leaves a refused object's key alone (no false deletion for it), then
  raises :class:`~k8py.client.keys.ObjectsRejected`;
- ``resync()`` queues ``Sync`` for every known object that has nothing queued;
- ``has_synced()`` turns true once the items of the first ``replace`` have all
  been popped (or at once if an add/update/delete came first).

**Unbounded, on purpose** (as client-go's): the FIFO holds at most one
entry per *key* (deltas of a key accumulate in its entry, and a pair of
deletions collapses), so its size is bounded by the number of objects the
reflector is mirroring plus those deleted since their last pop, not by the
event rate. Bounding it would mean blocking the reflector (its watch then
falls behind and the server closes it) or dropping deltas (the cache would
diverge silently): both worse than memory proportional to the cache the
informer keeps anyway. The per-handler buffers downstream are bounded (see
:mod:`k8py.client.processor_listener`).

``emit_delta_type_replaced`` defaults to true here, unlike client-go, where the
false default exists only for compatibility with consumers older than the
``Replaced`` type; k8py has none.

Concurrency: the FIFO belongs to one event loop and is not thread-safe. The
``process`` callback of :meth:`DeltaFIFO.pop` is deliberately synchronous:
between taking a key off the queue and updating ``known_objects`` no other
coroutine may run, or a ``replace`` in between would see the key in neither
place and miss its deletion (client-go runs ``process`` under the FIFO lock
for the same reason). ``process`` must therefore be quick: update the indexer
and hand notifications to buffered listeners, nothing that waits.
"""

from __future__ import annotations

import asyncio
import builtins
import enum
import logging
from collections import deque
from typing import Any, Callable, Iterable, NamedTuple, Protocol, TypeAlias, runtime_checkable

from k8py.client.keys import DeletedFinalStateUnknown, KeyFunc, ObjectsRejected, object_key

__all__ = [
    "DeltaType",
    "Delta",
    "Deltas",
    "KnownObjects",
    "ReflectorStore",
    "PopProcessFunc",
    "TransformFunc",
    "FIFOClosedError",
    "Requeue",
    "DeltaFIFO",
]

logger = logging.getLogger(__name__)


class DeltaType(str, enum.Enum):
    ADDED = "Added"
    UPDATED = "Updated"
    DELETED = "Deleted"
    REPLACED = "Replaced"  # re-list after a watch error; the object may have changed
    SYNC = "Sync"  # periodic resync; the object is unchanged


class Delta(NamedTuple):
    """One change: the object's state *after* it (for ``Deleted``, the last
    state before it, or a :class:`DeletedFinalStateUnknown`). Immutable; a
    named tuple because one is made per watch event (a frozen dataclass costs
    twice as much to build)."""

    type: DeltaType
    object: Any


Deltas: TypeAlias = list[Delta]
"""A key's changes, oldest first; never empty while queued."""

PopProcessFunc: TypeAlias = Callable[[Deltas, bool], None]
"""``process(deltas, is_in_initial_list)``; raise :class:`Requeue` to put them back."""

TransformFunc: TypeAlias = Callable[[Any], Any]
"""Called on every object (tombstones included) before it is queued."""


class KnownObjects(Protocol):
    """What the FIFO needs from the consumer's cache (the indexer)."""

    def list_keys(self) -> list[str]: ...

    def get_by_key(self, key: str) -> Any | None: ...


@runtime_checkable
class ReflectorStore(Protocol):
    """The subset of a store that a reflector drives (client-go's
    ``ReflectorStore``). :class:`DeltaFIFO` and
    :class:`~k8py.client.indexer.Indexer` both satisfy it."""

    def add(self, obj: Any) -> None: ...

    def update(self, obj: Any) -> None: ...

    def delete(self, obj: Any) -> None: ...

    def replace(self, objects: Iterable[Any], resource_version: str) -> None: ...

    def resync(self) -> None: ...


class FIFOClosedError(Exception):
    """``pop`` on a closed, empty FIFO: the consumer should stop."""


class Requeue(Exception):
    """Raised by a ``process`` callback to put the popped deltas back (if the
    key has not been queued again meanwhile). ``pop`` then raises ``cause``,
    or returns normally when there is none."""

    def __init__(self, cause: BaseException | None = None) -> None:
        super().__init__(cause)
        self.cause = cause


class DeltaFIFO:
    """See the module docstring for the contract."""

    def __init__(
        self,
        *,
        key_func: KeyFunc = object_key,
        known_objects: KnownObjects | None = None,
        emit_delta_type_replaced: bool = True,
        transformer: TransformFunc | None = None,
    ) -> None:
        self._key_func = key_func
        self._known_objects = known_objects
        self._emit_replaced = emit_delta_type_replaced
        self._transformer = transformer
        self._items: dict[str, Deltas] = {}
        self._queue: deque[str] = deque()
        self._populated = False
        self._initial_population_count = 0
        self._closed = False
        self._changed = asyncio.Event()

    # -- keys and state ---------------------------------------------------------

    def key_of(self, obj: Any) -> str:
        """The key of an object, a tombstone, or a non-empty :data:`Deltas`."""
        if type(obj) is dict:  # the hot path: an object from a watch or a list
            return self._key_func(obj)
        if isinstance(obj, list):
            if not obj:
                raise ValueError("zero-length Deltas object; can't get key")
            obj = obj[-1].object
        if isinstance(obj, DeletedFinalStateUnknown):
            return obj.key
        return self._key_func(obj)

    def has_synced(self) -> bool:
        return self._populated and self._initial_population_count == 0

    @property
    def is_closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Wake every ``pop``; once the queue is empty they raise :class:`FIFOClosedError`."""
        self._closed = True
        self._changed.set()

    def __len__(self) -> int:
        return len(self._queue)

    # -- producer side ----------------------------------------------------------

    def add(self, obj: Any) -> None:
        self._populated = True
        self._queue_action(DeltaType.ADDED, obj)

    def update(self, obj: Any) -> None:
        self._populated = True
        self._queue_action(DeltaType.UPDATED, obj)

    def delete(self, obj: Any) -> None:
        """Queue ``Deleted`` unless the key is unknown both here and to
        ``known_objects`` (a re-list has already reported the deletion)."""
        key = self.key_of(obj)
        self._populated = True
        queued = key in self._items
        if self._known_objects is None:
            if not queued:
                return
        elif not queued and self._known_objects.get_by_key(key) is None:
            return
        self._queue_action(DeltaType.DELETED, obj)

    def add_if_not_present(self, deltas: Deltas) -> None:
        """Put popped deltas back unless the key has been queued again meanwhile."""
        self._add_if_not_present(self.key_of(deltas), deltas)

    def replace(self, objects: Iterable[Any], resource_version: str = "") -> None:
        """Queue a re-list; see the module docstring. ``resource_version`` is unused."""
        del resource_version
        action = DeltaType.REPLACED if self._emit_replaced else DeltaType.SYNC
        listed: set[str] = set()
        queued_listed: set[str] = set()
        rejected: list[tuple[Any, Exception]] = []
        for obj in objects:
            try:
                key = self.key_of(obj)
            except Exception as err:
                rejected.append((obj, err))
                continue
            listed.add(key)  # even if refused below: it exists, so it must not become a tombstone
            try:
                self._queue_action(action, obj)
            except Exception as err:
                rejected.append((obj, err))
                continue
            queued_listed.add(key)

        queued_deletions = 0
        for key in [k for k in self._queue if k not in listed]:
            last = self._items[key][-1].object
            if isinstance(last, DeletedFinalStateUnknown):
                last = last.obj
            queued_deletions += 1
            self._queue_action(DeltaType.DELETED, DeletedFinalStateUnknown(key, last))

        if self._known_objects is not None:
            for key in self._known_objects.list_keys():
                if key in listed or key in self._items:
                    continue
                last = self._known_objects.get_by_key(key)
                if last is None:
                    logger.info("known key vanished during replace; tombstone without object", extra={"key": key})
                queued_deletions += 1
                self._queue_action(DeltaType.DELETED, DeletedFinalStateUnknown(key, last))

        if not self._populated:
            self._populated = True
            self._initial_population_count = len(queued_listed) + queued_deletions
        if rejected:
            raise ObjectsRejected(rejected)

    def resync(self) -> None:
        """Queue ``Sync`` for every known object that has nothing queued."""
        if self._known_objects is None:
            return
        for key in self._known_objects.list_keys():
            obj = self._known_objects.get_by_key(key)
            if obj is None:
                continue
            if self._items.get(self.key_of(obj)):
                continue  # a queued event carries a newer state than the cache
            self._queue_action(DeltaType.SYNC, obj)

    # -- consumer side ----------------------------------------------------------

    async def pop(self, process: PopProcessFunc) -> Deltas:
        """Wait for a key, remove it with all its deltas, run ``process`` on them.

        Returns the deltas. Raises :class:`FIFOClosedError` once the FIFO is
        closed and empty, and whatever ``process`` raises (after requeueing
        for :class:`Requeue`).
        """
        while not self._queue:
            if self._closed:
                raise FIFOClosedError("DeltaFIFO: manipulating with closed queue")
            self._changed.clear()
            await self._changed.wait()
        is_in_initial_list = not self.has_synced()
        key = self._queue.popleft()
        if self._initial_population_count > 0:
            self._initial_population_count -= 1
        deltas = self._items.pop(key)
        try:
            process(deltas, is_in_initial_list)
        except Requeue as requeue:
            self._add_if_not_present(key, deltas)
            if requeue.cause is not None:
                raise requeue.cause from None
        return deltas

    # -- reads (treat returned objects as immutable) ----------------------------

    def list(self) -> builtins.list[Any]:
        """The newest object of every queued key, in queue order."""
        return [self._items[k][-1].object for k in self._queue]

    def list_keys(self) -> builtins.list[str]:
        return builtins.list(self._queue)

    def get(self, obj: Any) -> Deltas | None:
        return self.get_by_key(self.key_of(obj))

    def get_by_key(self, key: str) -> Deltas | None:
        """A copy of the key's deltas, or ``None`` if nothing is queued for it."""
        deltas = self._items.get(key)
        return builtins.list(deltas) if deltas is not None else None

    # -- internals ---------------------------------------------------------------

    def _add_if_not_present(self, key: str, deltas: Deltas) -> None:
        self._populated = True
        if key in self._items:
            return
        self._queue.append(key)
        self._items[key] = deltas
        self._changed.set()

    def _queue_action(self, action: DeltaType, obj: Any) -> None:
        key = self.key_of(obj)
        if self._transformer is not None:
            obj = self._transformer(obj)
        delta = _new_delta(Delta, (action, obj))  # Delta(action, obj) without its Python-level __new__
        deltas = self._items.get(key)
        if deltas is None:
            self._items[key] = [delta]
            self._queue.append(key)
        else:
            deltas.append(delta)
            if action is DeltaType.DELETED:
                _dedup_last_two(deltas)
        self._changed.set()


_new_delta = tuple.__new__


def _dedup_last_two(deltas: Deltas) -> None:
    """Collapse a trailing pair of deletions into the more informative one.

    Re-listing and watching can report one deletion twice (the watch event and
    a re-list tombstone), in either order.
    """
    if len(deltas) < 2:
        return
    newer, older = deltas[-1], deltas[-2]
    if newer.type is not DeltaType.DELETED or older.type is not DeltaType.DELETED:
        return
    keep = newer if isinstance(older.object, DeletedFinalStateUnknown) else older
    deltas[-2:] = [keep]
