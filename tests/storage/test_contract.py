"""The Storage contract (``k8py.storage.interface``): every backend must pass these.

Only the contract is used — no backend internals — and revisions are never
assumed dense or starting at 1: they are taken from what the store returns.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import AsyncIterator

import pytest

from k8py.storage.interface import (
    CompactedError,
    EventType,
    FutureRevisionError,
    KeyExistsError,
    KeyNotFoundError,
    RevisionConflictError,
    Storage,
    ValueTooLargeError,
    WatchBatch,
    WatchEvent,
)

PODS = "/registry/pods/"


@contextlib.asynccontextmanager
async def watching(storage: Storage, prefix: str, *, after: int) -> AsyncIterator[AsyncIterator[WatchBatch]]:
    stream = storage.watch(prefix, after=after)
    try:
        yield stream
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()


async def next_events(stream: AsyncIterator[WatchBatch], count: int, *, timeout: float = 5.0) -> list[WatchEvent]:
    """The next ``count`` events, skipping progress notifications."""
    events: list[WatchEvent] = []
    async with asyncio.timeout(timeout):
        while len(events) < count:
            batch = await anext(stream)
            assert all(e.revision <= batch.revision for e in batch.events)
            events.extend(batch.events)
    assert len(events) == count, f"expected {count} events, got {[e.kv.key for e in events]}"
    return events


async def next_progress(stream: AsyncIterator[WatchBatch], *, timeout: float = 5.0) -> WatchBatch:
    async with asyncio.timeout(timeout):
        while True:
            batch = await anext(stream)
            if not batch.events:
                return batch


# -- single-key operations ----------------------------------------------------------------


async def test_create_returns_a_new_revision_that_becomes_current(storage: Storage) -> None:
    before = await storage.current_revision()
    kv = await storage.create(PODS + "a", b"v1")
    assert (kv.key, kv.value) == (PODS + "a", b"v1")
    assert kv.create_revision == kv.mod_revision > before
    assert await storage.current_revision() == kv.mod_revision
    assert await storage.get(PODS + "a") == kv


async def test_create_of_an_existing_key_raises_key_exists_and_keeps_the_value(storage: Storage) -> None:
    kv = await storage.create(PODS + "a", b"v1")
    with pytest.raises(KeyExistsError) as info:
        await storage.create(PODS + "a", b"v2")
    assert info.value.key == PODS + "a"
    assert await storage.get(PODS + "a") == kv
    assert await storage.current_revision() == kv.mod_revision


async def test_get_of_a_missing_key_returns_none(storage: Storage) -> None:
    assert await storage.get(PODS + "missing") is None


async def test_update_replaces_the_value_and_keeps_the_create_revision(storage: Storage) -> None:
    created = await storage.create(PODS + "a", b"v1")
    updated = await storage.update(PODS + "a", b"v2", expected_revision=created.mod_revision)
    assert updated.value == b"v2"
    assert updated.create_revision == created.create_revision
    assert updated.mod_revision > created.mod_revision
    assert await storage.get(PODS + "a") == updated


async def test_update_without_expected_revision_needs_only_the_key_to_exist(storage: Storage) -> None:
    await storage.create(PODS + "a", b"v1")
    await storage.update(PODS + "a", b"v2", expected_revision=0)
    updated = await storage.update(PODS + "a", b"v3", expected_revision=0)
    assert (await storage.get(PODS + "a")) == updated
    assert updated.value == b"v3"


async def test_update_with_a_stale_revision_raises_conflict_carrying_the_current_kv(storage: Storage) -> None:
    created = await storage.create(PODS + "a", b"v1")
    current = await storage.update(PODS + "a", b"v2", expected_revision=created.mod_revision)
    with pytest.raises(RevisionConflictError) as info:
        await storage.update(PODS + "a", b"v3", expected_revision=created.mod_revision)
    assert info.value.expected == created.mod_revision
    assert info.value.current == current
    assert await storage.get(PODS + "a") == current


async def test_update_of_a_missing_key_raises_key_not_found(storage: Storage) -> None:
    with pytest.raises(KeyNotFoundError):
        await storage.update(PODS + "missing", b"v", expected_revision=0)
    with pytest.raises((KeyNotFoundError, RevisionConflictError)):
        await storage.update(PODS + "missing", b"v", expected_revision=5)
    assert await storage.get(PODS + "missing") is None


async def test_delete_returns_the_last_value_at_the_delete_revision(storage: Storage) -> None:
    created = await storage.create(PODS + "a", b"v1")
    deleted = await storage.delete(PODS + "a")
    assert deleted.value == b"v1"
    assert deleted.create_revision == created.create_revision
    assert deleted.mod_revision > created.mod_revision
    assert await storage.current_revision() == deleted.mod_revision
    assert await storage.get(PODS + "a") is None
    assert (await storage.list(PODS)).kvs == []


async def test_guarded_delete_with_a_stale_revision_raises_conflict_and_keeps_the_key(storage: Storage) -> None:
    created = await storage.create(PODS + "a", b"v1")
    current = await storage.update(PODS + "a", b"v2", expected_revision=0)
    with pytest.raises(RevisionConflictError):
        await storage.delete(PODS + "a", expected_revision=created.mod_revision)
    assert await storage.get(PODS + "a") == current
    deleted = await storage.delete(PODS + "a", expected_revision=current.mod_revision)
    assert deleted.value == b"v2"


async def test_delete_of_a_missing_key_raises_key_not_found(storage: Storage) -> None:
    with pytest.raises(KeyNotFoundError):
        await storage.delete(PODS + "missing")


async def test_a_deleted_key_can_be_created_again_with_a_new_create_revision(storage: Storage) -> None:
    first = await storage.create(PODS + "a", b"v1")
    await storage.delete(PODS + "a")
    second = await storage.create(PODS + "a", b"v2")
    assert second.create_revision == second.mod_revision > first.create_revision
    assert await storage.get(PODS + "a") == second


async def test_failed_writes_do_not_advance_the_revision(storage: Storage) -> None:
    kv = await storage.create(PODS + "a", b"v1")
    for failing in (
        storage.create(PODS + "a", b"again"),
        storage.update(PODS + "missing", b"v", expected_revision=0),
        storage.update(PODS + "a", b"v", expected_revision=kv.mod_revision + 1000),
        storage.delete(PODS + "missing"),
    ):
        with pytest.raises((KeyExistsError, KeyNotFoundError, RevisionConflictError)):
            await failing
    assert await storage.current_revision() == kv.mod_revision


async def test_a_value_over_the_size_limit_raises_value_too_large(storage: Storage) -> None:
    with pytest.raises(ValueTooLargeError):
        await storage.create(PODS + "big", b"x" * (2 * 1024 * 1024))
    assert await storage.get(PODS + "big") is None


async def test_values_are_opaque_bytes(storage: Storage) -> None:
    value = bytes(range(256)) * 4
    await storage.create(PODS + "bin", value)
    assert (await storage.get(PODS + "bin")).value == value  # type: ignore[union-attr]


# -- list, count, reads at a revision ----------------------------------------------------------


async def test_list_returns_only_keys_under_the_prefix_in_key_order(storage: Storage) -> None:
    for key in ("/registry/pods/b", "/registry/pods/a", "/registry/podsx/c", "/registry/pod", "/registry/pods/c/d"):
        await storage.create(key, key.encode())
    result = await storage.list(PODS)
    assert [kv.key for kv in result.kvs] == ["/registry/pods/a", "/registry/pods/b", "/registry/pods/c/d"]
    assert result.more is False
    assert result.revision == await storage.current_revision()
    assert await storage.count(PODS) == 3
    assert await storage.count("/registry/") == 5


async def test_list_and_get_at_an_old_revision_show_the_state_then(storage: Storage) -> None:
    a1 = await storage.create(PODS + "a", b"a1")
    b1 = await storage.create(PODS + "b", b"b1")
    a2 = await storage.update(PODS + "a", b"a2", expected_revision=a1.mod_revision)
    await storage.delete(PODS + "b")
    c1 = await storage.create(PODS + "c", b"c1")

    assert (await storage.list(PODS, revision=a1.mod_revision)).kvs == [a1]
    assert (await storage.list(PODS, revision=b1.mod_revision)).kvs == [a1, b1]
    at_a2 = await storage.list(PODS, revision=a2.mod_revision)
    assert at_a2.kvs == [a2, b1]
    assert at_a2.revision == a2.mod_revision
    assert (await storage.list(PODS)).kvs == [a2, c1]
    assert await storage.get(PODS + "a", revision=a1.mod_revision) == a1
    assert await storage.get(PODS + "b", revision=a2.mod_revision) == b1
    assert await storage.get(PODS + "b") is None
    assert await storage.get(PODS + "c", revision=a2.mod_revision) is None


async def test_list_at_a_future_revision_raises_future_revision(storage: Storage) -> None:
    kv = await storage.create(PODS + "a", b"v")
    with pytest.raises(FutureRevisionError):
        await storage.list(PODS, revision=kv.mod_revision + 100)


async def test_pagination_visits_every_key_once_at_the_first_page_revision(storage: Storage) -> None:
    keys = [f"{PODS}p{i:02d}" for i in range(25)]
    for key in keys:
        await storage.create(key, b"v")
    first = await storage.list(PODS, limit=7)
    assert first.more is True
    assert len(first.kvs) == 7
    assert first.remaining == 18
    # Changes after the first page must not show on later pages read at its revision.
    await storage.create(PODS + "p00a", b"late")
    await storage.delete(keys[20])

    seen = [kv.key for kv in first.kvs]
    page = first
    pages = 1
    while page.more:
        page = await storage.list(PODS, revision=first.revision, limit=7, start_after=seen[-1])
        assert page.revision == first.revision
        seen.extend(kv.key for kv in page.kvs)
        pages += 1
        assert pages <= 5
    assert seen == keys
    assert pages == 4
    assert len(page.kvs) == 4


async def test_a_limit_that_covers_every_key_reports_no_more(storage: Storage) -> None:
    for i in range(3):
        await storage.create(f"{PODS}k{i}", b"v")
    result = await storage.list(PODS, limit=3)
    assert len(result.kvs) == 3
    assert result.more is False


# -- watch ------------------------------------------------------------------------------------


async def test_watch_replays_history_after_the_revision_then_goes_live(storage: Storage) -> None:
    a1 = await storage.create(PODS + "a", b"a1")
    a2 = await storage.update(PODS + "a", b"a2", expected_revision=a1.mod_revision)
    b1 = await storage.create(PODS + "b", b"b1")
    async with watching(storage, PODS, after=a1.mod_revision) as stream:
        replayed = await next_events(stream, 2)
        assert [(e.type, e.kv) for e in replayed] == [(EventType.PUT, a2), (EventType.PUT, b1)]
        assert replayed[1].is_create and not replayed[0].is_create
        assert replayed[0].prev_kv in (None, a1)
        live = await storage.delete(PODS + "a", expected_revision=a2.mod_revision)
        (event,) = await next_events(stream, 1)
        assert event.type is EventType.DELETE
        assert event.kv == live
        assert event.kv.value == b"a2"


async def test_watch_only_delivers_keys_under_its_prefix(storage: Storage) -> None:
    start = await storage.current_revision()
    async with watching(storage, PODS, after=start) as stream:
        await storage.create("/registry/services/a", b"s")
        await storage.create("/registry/podsx", b"x")
        pod = await storage.create(PODS + "a", b"p")
        (event,) = await next_events(stream, 1)
        assert event.kv == pod


async def test_list_then_watch_after_the_list_revision_sees_every_later_change(storage: Storage) -> None:
    for i in range(5):
        await storage.create(f"{PODS}{i}", b"v")
    listed = await storage.list(PODS)
    written = [await storage.create(f"{PODS}late{i}", b"v") for i in range(3)]
    async with watching(storage, PODS, after=listed.revision) as stream:
        written.append(await storage.update(f"{PODS}0", b"w", expected_revision=0))
        events = await next_events(stream, 4)
    assert [e.kv for e in events] == written


async def test_an_idle_watch_sends_a_progress_notification_at_the_current_revision(storage: Storage) -> None:
    kv = await storage.create(PODS + "a", b"v")
    await storage.create("/registry/other/b", b"v")  # outside the prefix
    async with watching(storage, PODS, after=kv.mod_revision) as stream:
        progress = await next_progress(stream, timeout=5.0)
        assert progress.events == ()
        assert progress.revision == await storage.current_revision()


async def test_a_watch_from_a_compacted_revision_raises_compacted(storage: Storage) -> None:
    kvs = [await storage.create(f"{PODS}{i}", b"v") for i in range(4)]
    compact_at = kvs[2].mod_revision
    await storage.compact(compact_at)
    with pytest.raises(CompactedError):
        async with watching(storage, PODS, after=kvs[0].mod_revision) as stream:
            await anext(stream)
    async with watching(storage, PODS, after=compact_at - 1) as stream:
        events = await next_events(stream, 2)
    assert [e.kv for e in events] == kvs[2:]


# -- compaction ---------------------------------------------------------------------------------


async def test_compaction_refuses_older_reads_and_keeps_the_state_at_its_revision(storage: Storage) -> None:
    a1 = await storage.create(PODS + "a", b"a1")
    b1 = await storage.create(PODS + "b", b"b1")
    a2 = await storage.update(PODS + "a", b"a2", expected_revision=a1.mod_revision)
    await storage.delete(PODS + "b")
    c1 = await storage.create(PODS + "c", b"c1")
    a3 = await storage.update(PODS + "a", b"a3", expected_revision=a2.mod_revision)

    await storage.compact(c1.mod_revision)
    assert await storage.compacted_revision() == c1.mod_revision
    with pytest.raises(CompactedError):
        await storage.list(PODS, revision=b1.mod_revision)
    with pytest.raises(CompactedError):
        await storage.get(PODS + "a", revision=a2.mod_revision)
    assert (await storage.list(PODS, revision=c1.mod_revision)).kvs == [a2, c1]
    assert (await storage.list(PODS)).kvs == [a3, c1]
    assert await storage.get(PODS + "b", revision=c1.mod_revision) is None


async def test_compacting_at_or_below_the_compacted_revision_is_a_no_op(storage: Storage) -> None:
    kvs = [await storage.create(f"{PODS}{i}", b"v") for i in range(3)]
    await storage.compact(kvs[2].mod_revision)
    await storage.compact(kvs[0].mod_revision)
    assert await storage.compacted_revision() == kvs[2].mod_revision
    assert len((await storage.list(PODS)).kvs) == 3


async def test_compacting_above_the_current_revision_raises_future_revision(storage: Storage) -> None:
    kv = await storage.create(PODS + "a", b"v")
    with pytest.raises(FutureRevisionError):
        await storage.compact(kv.mod_revision + 10)


# -- concurrency --------------------------------------------------------------------------------


async def test_concurrent_writers_each_get_a_distinct_revision(storage: Storage) -> None:
    before = await storage.current_revision()
    kvs = await asyncio.gather(*(storage.create(f"{PODS}c{i}", str(i).encode()) for i in range(64)))
    revisions = [kv.mod_revision for kv in kvs]
    assert len(set(revisions)) == 64
    assert min(revisions) > before
    assert await storage.current_revision() == max(revisions)
    assert await storage.count(PODS) == 64


async def test_concurrent_guarded_updates_of_one_key_let_exactly_one_win(storage: Storage) -> None:
    kv = await storage.create(PODS + "a", b"v0")
    results = await asyncio.gather(
        *(storage.update(PODS + "a", f"v{i}".encode(), expected_revision=kv.mod_revision) for i in range(1, 11)),
        return_exceptions=True,
    )
    winners = [r for r in results if not isinstance(r, BaseException)]
    assert len(winners) == 1
    assert all(isinstance(r, RevisionConflictError) for r in results if r not in winners)
    assert await storage.get(PODS + "a") == winners[0]


async def test_a_watch_sees_every_write_of_concurrent_writers_once_in_revision_order(storage: Storage) -> None:
    writers, per_writer = 8, 15
    start = await storage.current_revision()

    async def writer(w: int) -> list[int]:
        key = f"{PODS}w{w}"
        kv = await storage.create(key, b"0")
        revisions = [kv.mod_revision]
        for i in range(1, per_writer - 1):
            kv = await storage.update(key, str(i).encode(), expected_revision=kv.mod_revision)
            revisions.append(kv.mod_revision)
        revisions.append((await storage.delete(key, expected_revision=kv.mod_revision)).mod_revision)
        return revisions

    async with watching(storage, PODS, after=start) as stream:
        acked = await asyncio.gather(*(writer(w) for w in range(writers)))
        events = await next_events(stream, writers * per_writer, timeout=10.0)
    revisions = [e.revision for e in events]
    assert revisions == sorted(revisions)
    assert len(set(revisions)) == len(revisions)
    assert set(revisions) == {r for rs in acked for r in rs}
    for w in range(writers):
        mine = [e for e in events if e.kv.key == f"{PODS}w{w}"]
        assert mine[0].is_create
        assert mine[-1].type is EventType.DELETE
        assert [e.kv.value for e in mine[:-1]] == [str(i).encode() for i in range(per_writer - 1)]
