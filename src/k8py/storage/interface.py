"""The revisioned key-value store contract, in etcd v3's model.

Every backend (embedded SQLite, etcd) implements :class:`Storage`. The API
server is the only user; nothing else in k8py touches a store.

Model (etcd's):

- One global **revision** counter. Every successful write (create, update,
  delete) takes the next revision; a key's ``mod_revision`` becomes the object's
  ``resourceVersion``. Revisions only increase. A backend may skip numbers
  (etcd's revision is shared with keys outside our prefix); callers must not
  assume they are dense.
- ``create`` succeeds only if the key is absent; ``update`` and ``delete`` can be
  guarded by the expected ``mod_revision`` (optimistic concurrency).
- ``list`` reads a key prefix at a revision (0 = current), sorted by key, with
  ``limit`` and a ``start_after`` key for pagination; it returns the revision it
  read at, so later pages can read at the same revision.
- ``watch`` streams every change under a prefix with revision > ``after``, in
  revision order, as batches. A batch may be empty: a *progress notification*
  saying "everything up to ``revision`` has been delivered" (feeds bookmarks and
  consistent reads).
- ``compact(C)`` forgets every revision older than ``C`` (the state *at* ``C``
  stays readable). Afterwards ``get``/``list`` at a revision < C, and
  ``watch(after=R)`` with R + 1 < C, raise :class:`CompactedError`.

- ``request_progress()`` asks every live watch of the whole key space to
  deliver, soon, a progress notification at a revision >= the store's
  revision when the call was made (the watch cache's consistent reads: etcd's
  revision also counts keys outside the watched prefix, so only a
  notification tells the watcher it has caught up).
- a watch that cannot keep up may be ended with :class:`WatchLaggedError`,
  carrying the revision up to which it delivered everything: watching again
  after that revision loses nothing (unless it has been compacted since).

Values are opaque bytes (the API server stores JSON). Keys are ``str`` paths
such as ``/registry/pods/default/web-0``.

Invariants every backend must keep (the contract test suite checks them):

- an acknowledged write is durable (survives ``kill -9`` of the process);
- a watch never skips or reorders events, and never delivers an event twice;
- ``list`` at revision R and then ``watch`` after R together see every change.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import AsyncIterator, Protocol, runtime_checkable

__all__ = [
    "KeyValue",
    "EventType",
    "WatchEvent",
    "WatchBatch",
    "ListResult",
    "Storage",
    "StorageError",
    "KeyExistsError",
    "KeyNotFoundError",
    "RevisionConflictError",
    "CompactedError",
    "FutureRevisionError",
    "StorageUnavailableError",
    "ValueTooLargeError",
    "WatchLaggedError",
]


@dataclass(frozen=True, slots=True)
class KeyValue:
    """One key at one revision."""

    key: str
    value: bytes
    create_revision: int
    mod_revision: int


class EventType(enum.Enum):
    PUT = "PUT"  # created or updated: kv.create_revision == kv.mod_revision on create
    DELETE = "DELETE"


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """A change. For DELETE, ``kv.value`` is the last value before the delete
    and ``kv.mod_revision`` is the revision of the delete itself."""

    type: EventType
    kv: KeyValue
    prev_kv: KeyValue | None = None

    @property
    def revision(self) -> int:
        return self.kv.mod_revision

    @property
    def is_create(self) -> bool:
        return self.type is EventType.PUT and self.kv.create_revision == self.kv.mod_revision


@dataclass(frozen=True, slots=True)
class WatchBatch:
    """Events in revision order, and the revision the stream has reached.

    ``revision`` >= every event's revision. An empty ``events`` tuple is a
    progress notification.
    """

    revision: int
    events: tuple[WatchEvent, ...] = ()


@dataclass(frozen=True, slots=True)
class ListResult:
    kvs: list[KeyValue]
    revision: int  # the revision the list was read at
    more: bool  # True when ``limit`` cut the list short
    remaining: int = 0  # keys after the last one returned (best effort)


class StorageError(Exception):
    """Base of every storage failure."""


class KeyExistsError(StorageError):
    def __init__(self, key: str) -> None:
        super().__init__(f"key already exists: {key}")
        self.key = key


class KeyNotFoundError(StorageError):
    def __init__(self, key: str) -> None:
        super().__init__(f"key not found: {key}")
        self.key = key


class RevisionConflictError(StorageError):
    """The key's mod_revision was not the expected one. ``current`` is what is
    stored now (None if the key is gone)."""

    def __init__(self, key: str, expected: int, current: KeyValue | None) -> None:
        super().__init__(
            f"revision conflict on {key}: expected {expected}, "
            f"found {current.mod_revision if current else 'no key'}"
        )
        self.key = key
        self.expected = expected
        self.current = current


class CompactedError(StorageError):
    """The requested revision is older than the oldest one still kept."""

    def __init__(self, requested: int, compacted: int) -> None:
        super().__init__(f"revision {requested} has been compacted (oldest kept: {compacted})")
        self.requested = requested
        self.compacted = compacted


class FutureRevisionError(StorageError):
    """The requested revision is newer than the store's current one."""

    def __init__(self, requested: int, current: int) -> None:
        super().__init__(f"revision {requested} is newer than the current {current}")
        self.requested = requested
        self.current = current


class StorageUnavailableError(StorageError):
    """The backend cannot be reached (etcd down, database closed)."""


class WatchLaggedError(StorageError):
    """The watch fell more than ``limit`` events behind and was dropped.
    Everything up to ``revision`` was delivered: watch again after it."""

    def __init__(self, revision: int, limit: int) -> None:
        super().__init__(f"watcher fell more than {limit} events behind after revision {revision}")
        self.revision = revision
        self.limit = limit


class ValueTooLargeError(StorageError):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"value of {size} bytes exceeds the store's limit of {limit}")
        self.size = size
        self.limit = limit


@runtime_checkable
class Storage(Protocol):
    """The contract. All methods are coroutines and safe to call concurrently."""

    async def start(self) -> None:
        """Open the store (create tables, connect). Idempotent."""

    async def close(self) -> None:
        """Release resources; running watches end."""

    async def current_revision(self) -> int:
        """The newest revision (0 for an empty store)."""

    async def compacted_revision(self) -> int:
        """``C`` of the last ``compact(C)``: the oldest readable revision (0 if never)."""

    async def create(self, key: str, value: bytes) -> KeyValue:
        """Store ``value`` under ``key`` if absent. Raises KeyExistsError."""

    async def get(self, key: str, *, revision: int = 0) -> KeyValue | None:
        """The key at ``revision`` (0 = current), or None."""

    async def list(
        self,
        prefix: str,
        *,
        revision: int = 0,
        limit: int = 0,
        start_after: str = "",
    ) -> ListResult:
        """Keys under ``prefix`` at ``revision`` (0 = current), sorted by key,
        starting after ``start_after``, at most ``limit`` (0 = all).
        Raises CompactedError / FutureRevisionError."""

    async def count(self, prefix: str) -> int:
        """How many keys live under ``prefix`` now."""

    async def update(self, key: str, value: bytes, *, expected_revision: int) -> KeyValue:
        """Replace the value if the key's mod_revision is ``expected_revision``
        (0 = unconditional, but the key must exist). Raises KeyNotFoundError or
        RevisionConflictError."""

    async def delete(self, key: str, *, expected_revision: int = 0) -> KeyValue:
        """Delete the key (guarded like ``update``). Returns the deleted value
        with ``mod_revision`` set to the delete's revision."""

    def watch(self, prefix: str, *, after: int) -> AsyncIterator[WatchBatch]:
        """Every change under ``prefix`` with revision > ``after``, then live.
        Raises CompactedError (on first iteration) if ``after`` is older than
        the compacted revision, WatchLaggedError if the consumer fell too far
        behind. The iterator ends only when the store closes."""

    async def request_progress(self) -> None:
        """Make every live watch soon deliver a progress notification at a
        revision >= the current one. Returns before the watches deliver it;
        raises StorageError if the request could not be made."""

    async def compact(self, revision: int) -> None:
        """Forget history older than ``revision`` (the value of each key as of
        ``revision`` is kept). Compacting at or below the current compacted
        revision is a no-op; above the current revision raises FutureRevisionError."""
