"""Reads of the SQLite store, on a small pool of threads with their own connections.

Why a pool: ``sqlite3`` blocks, and WAL lets readers run beside the writer,
each on a snapshot of the last COMMIT. Every reader thread opens one
read-only connection on first use and keeps it; :meth:`ReaderPool.close`
closes them all once the threads are done.

The functions here answer "at revision R" questions and never decide *which*
R: the caller (``SqliteStorage``) resolves 0 to the published revision and
checks it against the compacted and current revisions, so a reader's snapshot
being newer than R never shows: every query is bounded by R.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, TypeVar

from k8py.storage import sqlite_schema as sql
from k8py.storage.interface import EventType, KeyValue, StorageUnavailableError, WatchEvent

__all__ = ["ReaderPool", "get_at", "list_at", "count_at", "replay"]

T = TypeVar("T")


class ReaderPool:
    """``run(fn, *args)`` calls ``fn(conn, *args)`` on a reader thread."""

    def __init__(self, path: str, *, threads: int = 4) -> None:
        self._path = path
        self._local = threading.local()
        self._lock = threading.Lock()
        self._conns: list[sqlite3.Connection] = []
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="k8py-sqlite-reader")

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sql.connect(self._path, readonly=True)
            self._local.conn = conn
            with self._lock:
                self._conns.append(conn)
        return conn

    def _call(self, fn: Callable[..., T], args: tuple[object, ...]) -> T:
        return fn(self._conn(), *args)

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        loop = asyncio.get_running_loop()
        try:
            future = loop.run_in_executor(self._executor, self._call, fn, args)
        except RuntimeError as exc:  # the pool has been shut down
            raise StorageUnavailableError("the store is closed") from exc
        return await future

    async def close(self) -> None:
        await asyncio.to_thread(self._executor.shutdown, wait=True)
        with self._lock:
            for conn in self._conns:
                conn.close()
            self._conns.clear()


def _range(prefix: str, start_after: str = "") -> tuple[dict[str, object], bool, bool]:
    """Bind values for a prefix range, narrowed to keys after ``start_after``."""
    hi = sql.prefix_end(prefix)
    exclusive = bool(start_after) and start_after >= prefix
    params: dict[str, object] = {"lo": start_after if exclusive else prefix}
    if hi is not None:
        params["hi"] = hi
    return params, exclusive, hi is not None


def get_at(conn: sqlite3.Connection, key: str, revision: int) -> KeyValue | None:
    row = conn.execute(sql.GET_AT, {"key": key, "rev": revision}).fetchone()
    if row is None or row[3]:
        return None
    return KeyValue(key, row[1], row[2], row[0])


def list_at(
    conn: sqlite3.Connection, prefix: str, revision: int, limit: int, start_after: str
) -> tuple[list[KeyValue], bool, int]:
    """(kvs, more, remaining) of a prefix at ``revision``; one read transaction,
    so the page and the count of what follows agree."""
    params, exclusive, bounded = _range(prefix, start_after)
    params["rev"] = revision
    params["limit"] = limit + 1 if limit > 0 else -1
    conn.execute("BEGIN")
    try:
        rows = conn.execute(sql.list_sql(exclusive_start=exclusive, bounded=bounded), params).fetchall()
        more = limit > 0 and len(rows) > limit
        remaining = 0
        if more:
            rows = rows[:limit]
            params["lo"] = rows[-1][0]
            del params["limit"]
            count = sql.count_sql(exclusive_start=True, bounded=bounded)
            remaining = conn.execute(count, params).fetchone()[0]
    finally:
        conn.execute("COMMIT")
    return [KeyValue(r[0], r[1], r[2], r[3]) for r in rows], more, remaining


def count_at(conn: sqlite3.Connection, prefix: str, revision: int) -> int:
    params, exclusive, bounded = _range(prefix)
    params["rev"] = revision
    return conn.execute(sql.count_sql(exclusive_start=exclusive, bounded=bounded), params).fetchone()[0]


def replay(conn: sqlite3.Connection, prefix: str, after: int, upto: int, limit: int) -> list[WatchEvent]:
    """The log under ``prefix`` with ``after < revision <= upto`` as events."""
    params, _, bounded = _range(prefix)
    params.update(after=after, upto=upto, limit=limit)
    events = []
    for revision, key, value, deleted, create_rev, prev_rev, prev_value in conn.execute(
        sql.replay_sql(bounded=bounded), params
    ):
        if deleted:  # a tombstone carries the value it deleted
            prev_value = value
        prev = KeyValue(key, prev_value, create_rev, prev_rev) if prev_value is not None else None
        kv = KeyValue(key, value, create_rev, revision)
        events.append(WatchEvent(EventType.DELETE if deleted else EventType.PUT, kv, prev))
    return events
