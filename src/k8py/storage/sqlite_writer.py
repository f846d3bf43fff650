"""The single writer of the SQLite store: one thread, one connection, group commit.

Why a thread: ``sqlite3`` blocks, and SQLite admits one writer at a time
anyway. Every mutation of the database goes through :class:`Writer`, so
revisions are assigned in one place without locks or retries.

Group commit: the writes submitted during one pass of the event loop are
handed to the thread together (one queue hand-off, one wake-up of the
thread, however many requests submitted); the thread takes the first queued
hand-off, then everything else already queued (up to ``max_batch``), and
applies them all in one ``BEGIN IMMEDIATE`` … ``COMMIT`` — one fsync for the
batch. While that fsync
runs, new operations queue up and form the next batch, so the number of
transactions per write falls as concurrency rises. Each operation is still
checked on its own (create-if-absent, expected revision) against the state
the transaction sees, including earlier operations of the same batch; a
failed check fails that operation only and consumes no revision.

Invariants:

- a caller's future is resolved only after its batch's COMMIT has returned
  (``synchronous=FULL``: the WAL is on disk), and only from the event loop;
- the ``on_commit`` callback runs on the event loop for every committed batch,
  in revision order, *before* the batch's futures are resolved, so a watcher
  has been offered a write before its writer learns the write succeeded;
- if SQLite fails mid-batch the transaction is rolled back, the revision
  counter is left untouched, and every operation of the batch fails with
  :class:`StorageUnavailableError`;
- a compaction step runs in a transaction of its own, between write batches,
  and deletes a bounded window of revisions, so it never stalls writers long.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import queue
import sqlite3
import threading
from dataclasses import dataclass
from typing import Callable, Sequence

from k8py.storage import sqlite_schema as sql
from k8py.storage.interface import (
    EventType,
    KeyExistsError,
    KeyNotFoundError,
    KeyValue,
    RevisionConflictError,
    StorageError,
    StorageUnavailableError,
    WatchEvent,
)

__all__ = ["OpKind", "Writer", "CommitCallback"]

log = logging.getLogger(__name__)

# (committed events in revision order, the revision after the batch)
CommitCallback = Callable[[Sequence[WatchEvent], int], None]


class OpKind(enum.Enum):
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"


@dataclass(slots=True)
class _WriteOp:
    kind: OpKind
    key: str
    value: bytes
    expected: int
    future: asyncio.Future[KeyValue]


@dataclass(slots=True)
class _CompactOp:
    upto: int
    future: asyncio.Future[None]


_STOP = object()


class Writer:
    """Owns the write connection. ``start()`` opens the database and creates
    the schema; ``submit``/``compact_step`` queue work; ``stop()`` drains.

    Counters (read them from the loop; they only grow): ``transactions`` is
    the number of committed write transactions, ``writes`` the number of
    writes they carried.
    """

    def __init__(self, path: str, *, on_commit: CommitCallback, max_batch: int = 1000) -> None:
        self._path = path
        self._on_commit = on_commit
        self._max_batch = max_batch
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._conn: sqlite3.Connection | None = None
        self._stopping = False
        #: writes submitted in this pass of the loop, handed over by ``_hand_over``
        self._outbox: list[_WriteOp] = []
        self.revision = 0  # owned by the writer thread once started
        self.compacted = 0  # persisted compaction floor, owned by the writer thread
        self.transactions = 0
        self.writes = 0

    # -- lifecycle (event loop side) ------------------------------------------------

    async def start(self) -> tuple[int, int]:
        """Open the database, then run the writer thread. Returns the current
        and the persisted compacted revision."""
        self._loop = asyncio.get_running_loop()
        try:
            self._conn = await asyncio.to_thread(self._open)
        except sqlite3.Error as exc:
            raise StorageUnavailableError(f"cannot open sqlite store {self._path}: {exc}") from exc
        self._thread = threading.Thread(target=self._run, name="k8py-sqlite-writer", daemon=True)
        self._thread.start()
        return self.revision, self.compacted

    async def stop(self) -> None:
        """Finish what is queued, then close the connection. Operations
        submitted afterwards fail with StorageUnavailableError."""
        if self._thread is None or self._stopping:
            return
        self._stopping = True
        self._hand_over()
        self._queue.put(_STOP)
        await asyncio.to_thread(self._thread.join)

    def submit(self, kind: OpKind, key: str, value: bytes, expected: int) -> asyncio.Future[KeyValue]:
        assert self._loop is not None
        future: asyncio.Future[KeyValue] = self._loop.create_future()
        if self._stopping or self._thread is None:
            future.set_exception(StorageUnavailableError("the store is closed"))
        else:
            if not self._outbox:
                self._loop.call_soon(self._hand_over)
            self._outbox.append(_WriteOp(kind, key, value, expected, future))
        return future

    def _hand_over(self) -> None:
        """Queue this loop pass's writes for the thread as one item."""
        if self._outbox:
            ops, self._outbox = self._outbox, []
            if self._thread is None or not self._thread.is_alive():  # it died: nobody would take them
                self._deliver([(op.future, StorageUnavailableError("the store is closed")) for op in ops], (), None)
                return
            self._queue.put(ops)

    def compact_step(self, upto: int) -> asyncio.Future[None]:
        """Compact from the persisted floor up to ``upto`` (one transaction)."""
        assert self._loop is not None
        future: asyncio.Future[None] = self._loop.create_future()
        if self._stopping or self._thread is None:
            future.set_exception(StorageUnavailableError("the store is closed"))
        else:
            self._hand_over()  # writes submitted before it go first
            self._queue.put(_CompactOp(upto, future))
        return future

    # -- writer thread ------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        conn = sql.connect(self._path)
        conn.executescript(sql.SCHEMA)
        self.revision = conn.execute(sql.MAX_REVISION).fetchone()[0]
        row = conn.execute(sql.GET_META, ("compacted",)).fetchone()
        self.compacted = row[0] if row else 0
        return conn

    def _run(self) -> None:
        assert self._conn is not None
        carry: object | None = None
        try:
            while True:
                item = carry if carry is not None else self._queue.get()
                carry = None
                if item is _STOP:
                    return
                if isinstance(item, _CompactOp):
                    self._compact(item)
                    continue
                assert isinstance(item, list)
                batch: list[_WriteOp] = item
                while len(batch) < self._max_batch:
                    try:
                        nxt = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if not isinstance(nxt, list):
                        carry = nxt
                        break
                    batch.extend(nxt)
                for start in range(0, len(batch), self._max_batch):
                    self._commit(batch[start:start + self._max_batch])
        finally:
            self._stopping = True  # also when the thread dies of a bug: fail fast, never hang
            self._fail_queued()
            self._conn.close()

    def _fail_queued(self) -> None:
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, list):
                self._resolve([(op.future, StorageUnavailableError("the store is closed")) for op in item])
            elif isinstance(item, _CompactOp):
                self._resolve([(item.future, StorageUnavailableError("the store is closed"))])

    def _commit(self, batch: list[_WriteOp]) -> None:
        assert self._conn is not None
        cur = self._conn.cursor()
        results: list[tuple[asyncio.Future, object]] = []
        events: list[WatchEvent] = []
        revision = self.revision
        try:
            cur.execute("BEGIN IMMEDIATE")
            for op in batch:
                try:
                    kv, event = self._apply(cur, op, revision + 1)
                except StorageError as exc:
                    results.append((op.future, exc))
                    continue
                revision += 1
                results.append((op.future, kv))
                events.append(event)
            cur.execute("COMMIT")
        except Exception as exc:  # noqa: BLE001 - every caller of the batch gets the failure
            log.error("write batch failed, rolled back: error=%r ops=%d", exc, len(batch))
            self._rollback()
            failure = StorageUnavailableError(f"sqlite write failed: {exc}")
            results = [(op.future, failure) for op in batch]
            events = []
            revision = self.revision
        else:
            self.revision = revision
            self.transactions += 1
            self.writes += len(events)
        self._resolve(results, events, revision)

    def _apply(self, cur: sqlite3.Cursor, op: _WriteOp, revision: int) -> tuple[KeyValue, WatchEvent]:
        row = cur.execute(sql.NEWEST, {"key": op.key}).fetchone()
        live = row is not None and not row[3]
        current = KeyValue(op.key, row[1], row[2], row[0]) if live else None
        if op.kind is OpKind.CREATE:
            if current is not None:
                raise KeyExistsError(op.key)
            cur.execute(sql.INSERT, (revision, op.key, op.value, 1, 0, revision, 0))
            kv = KeyValue(op.key, op.value, revision, revision)
            return kv, WatchEvent(EventType.PUT, kv)
        if current is None:
            raise KeyNotFoundError(op.key)
        if op.expected and op.expected != current.mod_revision:
            raise RevisionConflictError(op.key, op.expected, current)
        if op.kind is OpKind.UPDATE:
            cur.execute(
                sql.INSERT,
                (revision, op.key, op.value, 0, 0, current.create_revision, current.mod_revision),
            )
            kv = KeyValue(op.key, op.value, current.create_revision, revision)
            return kv, WatchEvent(EventType.PUT, kv, current)
        cur.execute(
            sql.INSERT,
            (revision, op.key, current.value, 0, 1, current.create_revision, current.mod_revision),
        )
        kv = KeyValue(op.key, current.value, current.create_revision, revision)
        return kv, WatchEvent(EventType.DELETE, kv, current)

    def _compact(self, op: _CompactOp) -> None:
        assert self._conn is not None
        if op.upto <= self.compacted:
            self._resolve([(op.future, None)])
            return
        window = {"lo": self.compacted, "hi": op.upto}
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.execute(sql.COMPACT_SUPERSEDED, window)
            self._conn.execute(sql.COMPACT_TOMBSTONES, window)
            self._conn.execute(sql.SET_META, ("compacted", op.upto))
            self._conn.execute("COMMIT")
        except Exception as exc:  # noqa: BLE001 - the caller of compact() gets the failure
            log.error("compaction step failed, rolled back: error=%r upto=%d", exc, op.upto)
            self._rollback()
            self._resolve([(op.future, StorageUnavailableError(f"sqlite compaction failed: {exc}"))])
            return
        self.compacted = op.upto
        self._resolve([(op.future, None)])

    def _rollback(self) -> None:
        assert self._conn is not None
        try:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
        except sqlite3.Error as exc:  # SQLite may have rolled back itself already
            log.warning("rollback failed: error=%r", exc)

    def _resolve(
        self,
        results: list[tuple[asyncio.Future, object]],
        events: Sequence[WatchEvent] = (),
        revision: int | None = None,
    ) -> None:
        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(self._deliver, results, events, revision)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            pass

    def _deliver(
        self,
        results: list[tuple[asyncio.Future, object]],
        events: Sequence[WatchEvent],
        revision: int | None,
    ) -> None:
        if events and revision is not None:
            self._on_commit(events, revision)
        for future, outcome in results:
            if future.done():  # the caller was cancelled; the write stands anyway
                continue
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)
