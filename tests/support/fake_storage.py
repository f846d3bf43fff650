"""An in-memory :class:`k8py.storage.Storage` whose watches a test can lag or break.

Why a fake: the unit tests of the watch cache, the cacher, listing and
deletion need a store watch that falls behind, lags out or fails *on cue*,
which neither real backend does deterministically. Everything else is the
contract, in etcd's model (a global revision, guarded writes, reads at a
revision, watch from a revision, compaction), and the contract suite runs
over this store too (``tests/storage/conftest.py`` registers it as
``memory``), so the fake cannot drift from the real backends.

Faults (all take effect on every live watch at its next step):

- :meth:`pause_watches` / :meth:`resume_watches`: committed events queue up
  undelivered, as behind a slow store watch;
- :meth:`lag_watches`: each watch ends with ``WatchLaggedError`` carrying the
  last revision it delivered (what the SQLite store does to a consumer that
  falls too far behind); queued events are dropped;
- :meth:`break_watches`: each watch ends with the given exception
  (``StorageError``: a failed store; ``CompactedError``: compaction overtook it);
- ``fail_progress = True``: ``request_progress`` raises StorageError.

What the store saw: ``watch_calls`` (the ``after`` of each ``watch``),
``progress_requests``, ``lists`` (the revision each list read at).
History is never dropped (compaction only moves the floor reads may use).
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import AsyncIterator

from k8py.storage import (
    CompactedError,
    EventType,
    FutureRevisionError,
    KeyExistsError,
    KeyNotFoundError,
    KeyValue,
    ListResult,
    RevisionConflictError,
    StorageError,
    StorageUnavailableError,
    ValueTooLargeError,
    WatchBatch,
    WatchEvent,
    WatchLaggedError,
)

__all__ = ["MemoryStorage"]

MAX_VALUE = 1536 * 1024  # etcd's default request limit


class _Watch:
    __slots__ = ("prefix", "queue", "seen", "wake", "fault", "lag", "progress", "closed")

    def __init__(self, prefix: str, seen: int) -> None:
        self.prefix = prefix
        self.queue: deque[WatchEvent] = deque()
        self.seen = seen  # newest revision committed while subscribed
        self.wake = asyncio.Event()
        self.fault: BaseException | None = None
        self.lag = False
        self.progress = False
        self.closed = False


class MemoryStorage:
    def __init__(self, *, progress_interval: float | None = None, lag_limit: int = 1000) -> None:
        #: seconds of idleness before a watch sends a progress batch (None: only on request)
        self.progress_interval = progress_interval
        self.lag_limit = lag_limit
        self._revision = 0
        self._compacted = 0
        self._history: list[WatchEvent] = []
        self._current: dict[str, KeyValue] = {}
        self._watches: set[_Watch] = set()
        self._running = asyncio.Event()
        self._running.set()
        self._open = False
        self.fail_progress = False
        self.watch_calls: list[int] = []
        self.progress_requests = 0
        self.lists: list[int] = []

    # -- faults -------------------------------------------------------------------

    @property
    def live_watches(self) -> int:
        return len(self._watches)

    def pause_watches(self) -> None:
        self._running.clear()

    def resume_watches(self) -> None:
        self._running.set()
        for w in self._watches:
            w.wake.set()

    def lag_watches(self) -> None:
        for w in self._watches:
            w.lag = True
            w.wake.set()

    def break_watches(self, error: BaseException) -> None:
        for w in self._watches:
            w.fault = error
            w.wake.set()

    # -- lifecycle ----------------------------------------------------------------

    async def start(self) -> None:
        self._open = True

    async def close(self) -> None:
        self._open = False
        for w in self._watches:
            w.closed = True
            w.wake.set()

    def _check_open(self) -> None:
        if not self._open:
            raise StorageUnavailableError("the memory store is closed")

    # -- revisions and reads ----------------------------------------------------------

    async def current_revision(self) -> int:
        self._check_open()
        return self._revision

    async def compacted_revision(self) -> int:
        self._check_open()
        return self._compacted

    def _read_revision(self, revision: int) -> int:
        self._check_open()
        if revision <= 0:
            return self._revision
        if revision > self._revision:
            raise FutureRevisionError(revision, self._revision)
        if revision < self._compacted:
            raise CompactedError(revision, self._compacted)
        return revision

    def _state_at(self, revision: int) -> dict[str, KeyValue]:
        if revision == self._revision:
            return self._current
        state: dict[str, KeyValue] = {}
        for event in self._history:
            if event.revision > revision:
                break
            if event.type is EventType.DELETE:
                state.pop(event.kv.key, None)
            else:
                state[event.kv.key] = event.kv
        return state

    async def get(self, key: str, *, revision: int = 0) -> KeyValue | None:
        return self._state_at(self._read_revision(revision)).get(key)

    async def list(self, prefix: str, *, revision: int = 0, limit: int = 0, start_after: str = "") -> ListResult:
        at = self._read_revision(revision)
        self.lists.append(at)
        state = self._state_at(at)
        keys = sorted(k for k in state if k.startswith(prefix) and k > start_after)
        page = keys[:limit] if limit else keys
        return ListResult([state[k] for k in page], at, more=len(page) < len(keys), remaining=len(keys) - len(page))

    async def count(self, prefix: str) -> int:
        self._check_open()
        return sum(1 for k in self._current if k.startswith(prefix))

    # -- writes -------------------------------------------------------------------

    def _commit(self, event: WatchEvent) -> KeyValue:
        self._revision = event.revision
        self._history.append(event)
        if event.type is EventType.DELETE:
            del self._current[event.kv.key]
        else:
            self._current[event.kv.key] = event.kv
        for w in self._watches:
            w.seen = event.revision
            if event.kv.key.startswith(w.prefix):
                w.queue.append(event)
                w.wake.set()
        return event.kv

    async def create(self, key: str, value: bytes) -> KeyValue:
        self._check_open()
        if len(value) > MAX_VALUE:
            raise ValueTooLargeError(len(value), MAX_VALUE)
        if key in self._current:
            raise KeyExistsError(key)
        rev = self._revision + 1
        return self._commit(WatchEvent(EventType.PUT, KeyValue(key, value, rev, rev)))

    def _guard(self, key: str, expected: int) -> KeyValue:
        self._check_open()
        current = self._current.get(key)
        if current is None:
            raise KeyNotFoundError(key)
        if expected and current.mod_revision != expected:
            raise RevisionConflictError(key, expected, current)
        return current

    async def update(self, key: str, value: bytes, *, expected_revision: int) -> KeyValue:
        if len(value) > MAX_VALUE:
            raise ValueTooLargeError(len(value), MAX_VALUE)
        current = self._guard(key, expected_revision)
        kv = KeyValue(key, value, current.create_revision, self._revision + 1)
        return self._commit(WatchEvent(EventType.PUT, kv, current))

    async def delete(self, key: str, *, expected_revision: int = 0) -> KeyValue:
        current = self._guard(key, expected_revision)
        kv = KeyValue(key, current.value, current.create_revision, self._revision + 1)
        return self._commit(WatchEvent(EventType.DELETE, kv, current))

    async def compact(self, revision: int) -> None:
        self._check_open()
        if revision > self._revision:
            raise FutureRevisionError(revision, self._revision)
        self._compacted = max(self._compacted, revision)

    # -- watch --------------------------------------------------------------------

    async def request_progress(self) -> None:
        self._check_open()
        self.progress_requests += 1
        if self.fail_progress:
            raise StorageError("progress requests are failing (fault injected)")
        for w in self._watches:
            w.progress = True
            w.wake.set()

    def watch(self, prefix: str, *, after: int) -> AsyncIterator[WatchBatch]:
        self.watch_calls.append(after)
        return self._watch(prefix, after)

    async def _watch(self, prefix: str, after: int) -> AsyncIterator[WatchBatch]:
        self._check_open()
        if after + 1 < self._compacted:
            raise CompactedError(after, self._compacted)
        # replay and subscription in one step: nothing committed in between
        replay = tuple(e for e in self._history if e.revision > after and e.kv.key.startswith(prefix))
        w = _Watch(prefix, self._revision)
        self._watches.add(w)
        try:
            cursor = max(after, self._revision)
            if replay:
                yield WatchBatch(revision=cursor, events=replay)
            yield WatchBatch(revision=cursor)
            while True:
                if w.fault is not None:
                    raise w.fault
                if w.lag or len(w.queue) > self.lag_limit:
                    raise WatchLaggedError(cursor, self.lag_limit)
                paused = not self._running.is_set()
                if w.queue and not paused:
                    events = tuple(w.queue)
                    w.queue.clear()
                    w.progress = False
                    cursor = max(cursor, w.seen)
                    yield WatchBatch(revision=cursor, events=events)
                    continue
                if w.closed:
                    return
                if w.progress and not paused:
                    w.progress = False
                    cursor = max(cursor, w.seen)
                    yield WatchBatch(revision=cursor)
                    continue
                w.wake.clear()
                try:
                    async with asyncio.timeout(None if paused else self.progress_interval):
                        await w.wake.wait()
                except TimeoutError:
                    cursor = max(cursor, w.seen)
                    yield WatchBatch(revision=cursor)  # idle: a progress notification
        finally:
            self._watches.discard(w)
