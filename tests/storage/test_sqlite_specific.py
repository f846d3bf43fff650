"""What the SQLite backend promises beyond the contract: group commit, indexed
queries, durability of revisions and compaction across restarts, bounded
watcher queues, the background compactor."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from k8py.storage import sqlite_schema as sql
from k8py.storage.interface import (
    CompactedError,
    KeyExistsError,
    Storage,
    StorageUnavailableError,
    WatchBatch,
)
from k8py.storage.sqlite import SqliteStorage, WatchLaggedError

PODS = "/registry/pods/"


@pytest.fixture
def db_path(tmp_path: Path) -> str:
    return str(tmp_path / "store.db")


async def open_store(path: str, **options: object) -> SqliteStorage:
    store = SqliteStorage(path, **options)  # type: ignore[arg-type]
    await store.start()
    return store


def log_rows(path: str) -> list[tuple[int, str, int]]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT revision, key, deleted FROM log ORDER BY revision").fetchall()


# -- group commit -------------------------------------------------------------------------


async def test_concurrent_writes_share_transactions(db_path: str) -> None:
    store = await open_store(db_path)
    try:
        before = store.transaction_count
        await asyncio.gather(*(store.create(f"{PODS}{i}", b"v" * 100) for i in range(200)))
        transactions = store.transaction_count - before
        assert store.write_count == 200
        assert transactions <= 50, f"200 concurrent writes took {transactions} transactions"
    finally:
        await store.close()


async def test_writes_submitted_in_one_pass_of_the_loop_commit_together_within_max_batch(db_path: str) -> None:
    store = await open_store(db_path, max_batch=64)
    try:
        before = store.transaction_count
        results = await asyncio.gather(*(store.create(f"{PODS}{i}", b"v") for i in range(200)))
        # all 200 were submitted before the loop's next pass: one hand-off, cut at max_batch
        assert store.transaction_count - before == 4
        assert sorted(kv.mod_revision for kv in results) == list(range(results[0].mod_revision, results[0].mod_revision + 200))
    finally:
        await store.close()


async def test_writes_in_one_batch_are_still_checked_one_by_one(db_path: str) -> None:
    store = await open_store(db_path)
    try:
        results = await asyncio.gather(
            *(store.create(PODS + "same", str(i).encode()) for i in range(50)), return_exceptions=True
        )
        created = [r for r in results if not isinstance(r, BaseException)]
        assert len(created) == 1
        assert sum(isinstance(r, KeyExistsError) for r in results) == 49
        assert store.transaction_count < 50
        assert await store.current_revision() == created[0].mod_revision
    finally:
        await store.close()


async def test_sequential_writes_each_commit_on_their_own(db_path: str) -> None:
    store = await open_store(db_path)
    try:
        for i in range(5):
            await store.create(f"{PODS}{i}", b"v")
        assert store.transaction_count == 5
    finally:
        await store.close()


# -- indexes ------------------------------------------------------------------------------


def read_statements() -> dict[str, str]:
    statements = {
        "get_at": sql.GET_AT,
        "newest": sql.NEWEST,
        "compact_superseded": sql.COMPACT_SUPERSEDED,
        "compact_tombstones": sql.COMPACT_TOMBSTONES,
    }
    for bounded in (False, True):
        statements[f"replay bounded={bounded}"] = sql.replay_sql(bounded=bounded)
        for exclusive in (False, True):
            flags = f"bounded={bounded} exclusive={exclusive}"
            statements[f"list {flags}"] = sql.list_sql(exclusive_start=exclusive, bounded=bounded)
            statements[f"count {flags}"] = sql.count_sql(exclusive_start=exclusive, bounded=bounded)
    return statements


async def test_every_statement_is_answered_through_an_index(db_path: str) -> None:
    store = await open_store(db_path)
    try:
        for i in range(300):
            kv = await store.create(f"/registry/{'pods' if i % 2 else 'services'}/{i}", b"v")
            await store.update(kv.key, b"w", expected_revision=kv.mod_revision)
        revision = await store.current_revision()
    finally:
        await store.close()
    params = {"key": PODS + "1", "rev": revision, "lo": PODS, "hi": "/registry/pods0", "limit": 10}
    params.update(after=10, upto=revision)
    with sqlite3.connect(db_path) as conn:
        for name, statement in read_statements().items():
            plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + statement, params)]
            assert not [step for step in plan if step.startswith("SCAN")], f"{name} scans: {plan}"
            assert not [step for step in plan if "TEMP B-TREE" in step], f"{name} sorts: {plan}"
            assert any(step.startswith("SEARCH") for step in plan), f"{name}: {plan}"


def test_prefix_end_is_the_first_string_past_the_prefix() -> None:
    assert sql.prefix_end("/registry/pods/") == "/registry/pods0"
    assert sql.prefix_end("") is None
    assert sql.prefix_end("a\U0010ffff") == "b"
    assert sql.prefix_end("\U0010ffff") is None
    assert sql.prefix_end("x\ud7ff") == "x\ue000"


async def test_like_wildcards_in_a_prefix_match_literally(db_path: str) -> None:
    store = await open_store(db_path)
    try:
        await store.create("/a%b/1", b"v")
        await store.create("/a_b/1", b"v")
        await store.create("/axb/1", b"v")
        assert [kv.key for kv in (await store.list("/a%")).kvs] == ["/a%b/1"]
        assert [kv.key for kv in (await store.list("/a_")).kvs] == ["/a_b/1"]
    finally:
        await store.close()


# -- restarts -----------------------------------------------------------------------------


async def test_data_and_revision_survive_a_reopen(db_path: str) -> None:
    store = await open_store(db_path)
    a = await store.create(PODS + "a", b"a1")
    a = await store.update(PODS + "a", b"a2", expected_revision=a.mod_revision)
    b = await store.create(PODS + "b", b"b1")
    await store.close()

    store = await open_store(db_path)
    try:
        assert await store.current_revision() == b.mod_revision
        assert (await store.list(PODS)).kvs == [a, b]
        c = await store.create(PODS + "c", b"c1")
        assert c.mod_revision == b.mod_revision + 1
    finally:
        await store.close()


async def test_revision_never_goes_back_after_the_newest_keys_are_deleted_and_compacted(db_path: str) -> None:
    store = await open_store(db_path)
    await store.create(PODS + "a", b"v")
    gone = await store.delete(PODS + "a")
    await store.compact(gone.mod_revision)
    await store.close()

    store = await open_store(db_path)
    try:
        assert await store.current_revision() == gone.mod_revision
        assert (await store.create(PODS + "b", b"v")).mod_revision == gone.mod_revision + 1
    finally:
        await store.close()


async def test_the_compacted_revision_survives_a_reopen(db_path: str) -> None:
    store = await open_store(db_path)
    kvs = [await store.create(f"{PODS}{i}", b"v") for i in range(5)]
    await store.compact(kvs[3].mod_revision)
    await store.close()

    store = await open_store(db_path)
    try:
        assert await store.compacted_revision() == kvs[3].mod_revision
        with pytest.raises(CompactedError):
            await store.get(PODS + "0", revision=kvs[1].mod_revision)
        assert len((await store.list(PODS, revision=kvs[3].mod_revision)).kvs) == 4
    finally:
        await store.close()


# -- compaction ---------------------------------------------------------------------------


async def test_compaction_deletes_superseded_rows_and_old_tombstones(db_path: str) -> None:
    store = await open_store(db_path, compaction_step=2)
    try:
        kv = await store.create(PODS + "a", b"0")
        for i in range(1, 6):
            kv = await store.update(PODS + "a", str(i).encode(), expected_revision=kv.mod_revision)
        await store.create(PODS + "b", b"b")
        gone = await store.delete(PODS + "b")
        keep = await store.create(PODS + "c", b"c")
        await store.compact(keep.mod_revision)
        assert log_rows(db_path) == [(kv.mod_revision, PODS + "a", 0), (keep.mod_revision, PODS + "c", 0)]
        assert gone.mod_revision < keep.mod_revision
        assert [k.key for k in (await store.list(PODS)).kvs] == [PODS + "a", PODS + "c"]
    finally:
        await store.close()


async def test_the_background_compactor_keeps_a_bounded_window(db_path: str) -> None:
    store = await open_store(db_path, compaction_window=10, compaction_interval=0.05)
    try:
        kv = await store.create(PODS + "a", b"0")
        for i in range(60):
            kv = await store.update(PODS + "a", str(i).encode(), expected_revision=kv.mod_revision)
        # compact() raises the compacted revision before it deletes rows (so
        # reads are refused first): wait for the rows themselves to go
        async with asyncio.timeout(10):
            while await store.compacted_revision() != kv.mod_revision - 10 or len(log_rows(db_path)) > 12:
                await asyncio.sleep(0.02)
        assert len(log_rows(db_path)) <= 12  # the window, and the row its first revision replaced
        assert (await store.get(PODS + "a", revision=kv.mod_revision - 10)) is not None
    finally:
        await store.close()


# -- watch --------------------------------------------------------------------------------


async def test_a_watch_sends_progress_right_after_replay(db_path: str) -> None:
    store = await open_store(db_path, progress_interval=60)
    try:
        kvs = [await store.create(f"{PODS}{i}", b"v") for i in range(3)]
        stream = store.watch(PODS, after=kvs[0].mod_revision)
        async with asyncio.timeout(2):
            replayed = await anext(stream)
            progress = await anext(stream)
        assert [e.kv for e in replayed.events] == kvs[1:]
        assert progress == WatchBatch(revision=kvs[-1].mod_revision)
        await stream.aclose()
    finally:
        await store.close()


async def test_a_watcher_that_falls_too_far_behind_is_ended_with_an_error(db_path: str) -> None:
    store = await open_store(db_path, watch_queue_limit=10, progress_interval=60)
    try:
        stream = store.watch(PODS, after=0)
        first = await anext(stream)  # progress after an empty replay: subscribed
        assert first.events == ()
        await asyncio.gather(*(store.create(f"{PODS}{i}", b"v") for i in range(30)))
        with pytest.raises(WatchLaggedError) as info:
            async with asyncio.timeout(2):
                while True:
                    await anext(stream)
        assert info.value.revision == first.revision
    finally:
        await store.close()


async def test_closing_the_store_ends_its_watches_and_refuses_work(db_path: str) -> None:
    store = await open_store(db_path, progress_interval=60)
    stream = store.watch(PODS, after=0)
    await anext(stream)
    await store.close()
    async with asyncio.timeout(2):
        remaining = [batch async for batch in stream]
    assert remaining == []
    with pytest.raises(StorageUnavailableError):
        await store.create(PODS + "a", b"v")
    with pytest.raises(StorageUnavailableError):
        await store.list(PODS)


async def test_a_write_sqlite_cannot_store_fails_its_batch_and_the_store_goes_on(db_path: str) -> None:
    store = await open_store(db_path)
    try:
        unbindable = [1, 2]  # has a length, but SQLite cannot bind it
        results = await asyncio.gather(
            *(store.create(f"{PODS}{i}", b"v") for i in range(10)),
            store.create(PODS + "bad", unbindable),  # type: ignore[arg-type]
            *(store.create(f"{PODS}{i}", b"v") for i in range(10, 20)),
            return_exceptions=True,
        )
        assert isinstance(results[10], StorageUnavailableError)
        written = [r for r in results if not isinstance(r, BaseException)]
        assert all(isinstance(r, StorageUnavailableError) for r in results if r not in written)
        assert sorted(kv.mod_revision for kv in written) == list(range(1, len(written) + 1))
        assert (await store.list(PODS)).kvs == sorted(written, key=lambda kv: kv.key)
        after = await store.create(PODS + "after", b"v")
        assert after.mod_revision == len(written) + 1
    finally:
        await store.close()


async def test_the_store_satisfies_the_storage_protocol(db_path: str) -> None:
    store = SqliteStorage(db_path)
    assert isinstance(store, Storage)
    await store.start()
    await store.start()  # idempotent
    await store.close()
    await store.close()


async def test_reads_racing_close_fail_as_unavailable_or_succeed(db_path: str) -> None:
    store = await open_store(db_path)
    await store.create(PODS + "a", b"v")
    reads = [asyncio.create_task(store.list(PODS), name=f"read-{i}") for i in range(20)]
    await asyncio.sleep(0)
    await store.close()
    results = await asyncio.gather(*reads, return_exceptions=True)
    assert all(isinstance(r, StorageUnavailableError) or len(r.kvs) == 1 for r in results), results


async def test_a_watch_from_a_future_revision_starts_there(db_path: str) -> None:
    store = await open_store(db_path, progress_interval=60)
    try:
        start = await store.current_revision()
        stream = store.watch(PODS, after=start + 5)
        assert await anext(stream) == WatchBatch(revision=start + 5)
        kvs = [await store.create(f"{PODS}{i}", b"v") for i in range(7)]
        async with asyncio.timeout(2):
            batch = await anext(stream)
            events = list(batch.events)
            while len(events) < 2:
                events.extend((await anext(stream)).events)
        assert [e.kv for e in events] == kvs[5:]
        await stream.aclose()
    finally:
        await store.close()


async def test_a_store_that_cannot_open_its_file_fails_start_and_can_retry(tmp_path: Path) -> None:
    path = tmp_path / "missing-dir" / "store.db"
    store = SqliteStorage(str(path))
    with pytest.raises(StorageUnavailableError):
        await store.start()
    path.parent.mkdir()
    await store.start()
    try:
        assert (await store.create(PODS + "a", b"v")).mod_revision == 1
    finally:
        await store.close()
