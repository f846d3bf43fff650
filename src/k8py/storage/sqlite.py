"""The embedded backend of the Storage contract: one SQLite file, owned by one process.

Why SQLite: a single-node cluster needs no separate etcd. The whole history
lives in one ``log`` table (``sqlite_schema``), so reads at a revision, watch
replay and compaction are plain indexed queries.

How the parts fit:

- writes go to the single :class:`~k8py.storage.sqlite_writer.Writer` thread,
  which group-commits whatever is queued (one fsync per batch, WAL,
  ``synchronous=FULL``: an acknowledged write survives ``kill -9``);
- each committed batch is published on the event loop to the
  :class:`~k8py.storage.sqlite_watch.WatchHub` *before* the writers' futures
  resolve; the hub's ``revision`` is the store's current revision, so
  "current" never names a write that is not yet acknowledged;
- reads run on a :class:`~k8py.storage.sqlite_reader.ReaderPool` (never on
  the loop thread), each bounded by an explicit revision;
- a named background task compacts so that about ``compaction_window``
  revisions of history stay readable.

Compaction order: ``compact(C)`` first raises the in-memory compacted
revision (reads below C are refused from then on), then deletes rows in
bounded steps, each persisting its progress in ``meta``. A read that was
already running re-checks the compacted revision once its query is done, so it
never returns a history that compaction was tearing down.

Cancelling a caller's ``create``/``update``/``delete`` does not withdraw the
write: once queued it may still commit (as with etcd).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import AsyncIterator, Sequence

from k8py.storage import sqlite_reader as reader
from k8py.storage.interface import (
    CompactedError,
    FutureRevisionError,
    KeyValue,
    ListResult,
    StorageError,
    StorageUnavailableError,
    ValueTooLargeError,
    WatchBatch,
    WatchEvent,
)
from k8py.storage.sqlite_reader import ReaderPool
from k8py.storage.sqlite_watch import WatchHub, WatchLaggedError, watch_stream
from k8py.storage.sqlite_writer import OpKind, Writer

__all__ = ["SqliteStorage", "WatchLaggedError"]

log = logging.getLogger(__name__)


class SqliteStorage:
    """:class:`k8py.storage.interface.Storage` on a SQLite file at ``path``.

    Options beyond the contract: ``progress_interval`` (seconds of watch
    idleness before a progress notification), ``watch_queue_limit`` (events a
    watcher may fall behind before it is ended with :class:`WatchLaggedError`),
    ``compaction_step`` (revisions deleted per compaction transaction),
    ``reader_threads`` and ``max_batch`` (writes per transaction at most).

    ``transaction_count`` and ``write_count`` tell how well group commit
    batches: writes per transaction = ``write_count / transaction_count``.

    ``events_carry_written_values``: a live watch event of a create or an
    update carries the very ``bytes`` object the write was given (no copy),
    which lets the API server's watch cache recognise its own writes
    (``apiserver.watch.stored_hints``).
    """

    events_carry_written_values = True

    def __init__(
        self,
        path: str,
        *,
        compaction_window: int = 10_000,
        compaction_interval: float = 30.0,
        max_value_size: int = 1_572_864,
        progress_interval: float = 5.0,
        watch_queue_limit: int = 10_000,
        compaction_step: int = 5_000,
        reader_threads: int = 4,
        max_batch: int = 1000,
    ) -> None:
        self._path = path
        self._compaction_window = compaction_window
        self._compaction_interval = compaction_interval
        self._max_value_size = max_value_size
        self._progress_interval = progress_interval
        self._watch_queue_limit = watch_queue_limit
        self._compaction_step = compaction_step
        self._reader_threads = reader_threads
        self._max_batch = max_batch
        self._state = "new"  # -> starting -> open -> closed
        self._writer: Writer | None = None
        self._hub: WatchHub | None = None
        self._readers: ReaderPool | None = None
        self._compactor: asyncio.Task[None] | None = None
        self._compacted = 0  # reads below this are refused (target of the last compact())
        self._compact_lock = asyncio.Lock()

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        if self._state != "new":
            return
        self._state = "starting"
        self._writer = Writer(self._path, on_commit=self._on_commit, max_batch=self._max_batch)
        try:
            revision, compacted = await self._writer.start()
        except BaseException:
            self._state = "new"  # nothing was started: start() may be retried
            raise
        self._compacted = compacted
        self._hub = WatchHub(revision=revision, queue_limit=self._watch_queue_limit)
        self._readers = ReaderPool(self._path, threads=self._reader_threads)
        self._compactor = asyncio.create_task(self._compact_periodically(), name="k8py-sqlite-compactor")
        self._state = "open"
        log.info("sqlite store opened: path=%s revision=%d compacted=%d", self._path, revision, compacted)

    async def close(self) -> None:
        if self._state != "open":
            self._state = "closed"
            return
        self._state = "closed"
        assert self._writer and self._hub and self._readers and self._compactor
        self._compactor.cancel()
        await asyncio.wait([self._compactor])
        await self._writer.stop()  # queued writes commit and are published first
        self._hub.close()
        await self._readers.close()
        log.info("sqlite store closed: path=%s revision=%d", self._path, self._hub.revision)

    @property
    def transaction_count(self) -> int:
        return self._writer.transactions if self._writer else 0

    @property
    def write_count(self) -> int:
        return self._writer.writes if self._writer else 0

    # -- revisions ----------------------------------------------------------------------

    async def current_revision(self) -> int:
        return self._open_hub().revision

    async def compacted_revision(self) -> int:
        self._open_hub()
        return self._compacted

    def _open_hub(self) -> WatchHub:
        if self._state != "open" or self._hub is None:
            raise StorageUnavailableError(f"the store is {self._state}")
        return self._hub

    def _read_revision(self, revision: int) -> int:
        """The revision a read runs at: ``revision``, or the current one for 0."""
        current = self._open_hub().revision
        if revision <= 0:
            return current
        if revision > current:
            raise FutureRevisionError(revision, current)
        self._check_compacted(revision)
        return revision

    def _check_compacted(self, revision: int) -> None:
        if revision < self._compacted:
            raise CompactedError(revision, self._compacted)

    # -- reads --------------------------------------------------------------------------

    async def get(self, key: str, *, revision: int = 0) -> KeyValue | None:
        at = self._read_revision(revision)
        assert self._readers is not None
        kv = await self._readers.run(reader.get_at, key, at)
        self._check_compacted(at)
        return kv

    async def list(
        self,
        prefix: str,
        *,
        revision: int = 0,
        limit: int = 0,
        start_after: str = "",
    ) -> ListResult:
        at = self._read_revision(revision)
        assert self._readers is not None
        kvs, more, remaining = await self._readers.run(reader.list_at, prefix, at, limit, start_after)
        self._check_compacted(at)
        return ListResult(kvs=kvs, revision=at, more=more, remaining=remaining)

    async def count(self, prefix: str) -> int:
        at = self._read_revision(0)
        assert self._readers is not None
        return await self._readers.run(reader.count_at, prefix, at)

    # -- writes -------------------------------------------------------------------------

    async def create(self, key: str, value: bytes) -> KeyValue:
        return await self._write(OpKind.CREATE, key, value, 0)

    async def update(self, key: str, value: bytes, *, expected_revision: int) -> KeyValue:
        return await self._write(OpKind.UPDATE, key, value, expected_revision)

    async def delete(self, key: str, *, expected_revision: int = 0) -> KeyValue:
        return await self._write(OpKind.DELETE, key, b"", expected_revision)

    async def _write(self, kind: OpKind, key: str, value: bytes, expected: int) -> KeyValue:
        self._open_hub()
        if len(value) > self._max_value_size:
            raise ValueTooLargeError(len(value), self._max_value_size)
        assert self._writer is not None
        return await self._writer.submit(kind, key, value, expected)

    def _on_commit(self, events: Sequence[WatchEvent], revision: int) -> None:
        assert self._hub is not None
        self._hub.publish(events, revision)

    # -- watch --------------------------------------------------------------------------

    async def watch(self, prefix: str, *, after: int) -> AsyncIterator[WatchBatch]:
        """See the contract, and ``sqlite_watch`` for the bounded per-watcher
        queue: a watcher that falls more than ``watch_queue_limit`` events
        behind is ended with :class:`WatchLaggedError`."""
        hub = self._open_hub()
        assert self._readers is not None
        readers = self._readers

        async def replay(prefix: str, after: int, upto: int, limit: int) -> list[WatchEvent]:
            return await readers.run(reader.replay, prefix, after, upto, limit)

        stream = watch_stream(
            hub,
            prefix,
            after=after,
            replay=replay,
            compacted=lambda: self._compacted,
            progress_interval=self._progress_interval,
        )
        async with contextlib.aclosing(stream):
            async for batch in stream:
                yield batch

    async def request_progress(self) -> None:
        """Every live watch delivers a progress notification at the current
        revision on its next step (see the contract)."""
        self._open_hub().request_progress()

    # -- compaction ---------------------------------------------------------------------

    async def compact(self, revision: int) -> None:
        current = self._open_hub().revision
        if revision > current:
            raise FutureRevisionError(revision, current)
        if revision <= self._compacted:
            return
        self._compacted = revision  # refuse older reads before any row goes
        assert self._writer is not None
        async with self._compact_lock:
            while self._writer.compacted < revision:
                step = min(self._writer.compacted + self._compaction_step, revision)
                await self._writer.compact_step(step)
        log.debug("sqlite store compacted: revision=%d", revision)

    async def _compact_periodically(self) -> None:
        while True:
            await asyncio.sleep(self._compaction_interval)
            target = self._open_hub().revision - self._compaction_window
            if target <= self._compacted:
                continue
            try:
                await self.compact(target)
            except StorageError as exc:
                log.warning("background compaction failed: revision=%d error=%s", target, exc)
