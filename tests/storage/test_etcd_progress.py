"""EtcdStorage.request_progress: a fence write that a whole-store watch
delivers as a progress batch, in order with its events.

These tests run their own etcd with periodic progress notifications every
10 minutes (etcd's default), so any progress batch seen within a test came
from ``request_progress`` and not from the timer.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from k8py.cli.etcd import ETCD_BINARY, EtcdCluster, start_etcd_cluster
from k8py.storage.etcd import EtcdStorage
from k8py.storage.interface import WatchBatch

pytestmark = [pytest.mark.etcd, pytest.mark.skipif(not os.path.exists(ETCD_BINARY), reason="etcd not installed")]

WAIT = 2.0  # bound on every wait below; a fence arrives in milliseconds


@pytest.fixture(scope="module")
def quiet_etcd() -> Iterator[EtcdCluster]:
    with tempfile.TemporaryDirectory(prefix="k8py-etcd-progress-") as data_dir:
        with start_etcd_cluster(data_dir, progress_notify_interval="10m") as cluster:
            yield cluster


@contextlib.asynccontextmanager
async def open_store(cluster: EtcdCluster) -> AsyncIterator[EtcdStorage]:
    store = EtcdStorage(cluster.client_urls, prefix=f"/p-{uuid.uuid4().hex[:12]}/registry", compaction_interval=None)
    await store.start()
    try:
        yield store
    finally:
        await store.close()


class Collector:
    """Runs a watch in a task and keeps every batch."""

    def __init__(self, store: EtcdStorage, prefix: str, after: int) -> None:
        self.batches: list[WatchBatch] = []
        self._changed = asyncio.Event()
        self._task = asyncio.create_task(self._run(store, prefix, after), name="test-watch")

    async def _run(self, store: EtcdStorage, prefix: str, after: int) -> None:
        async for batch in store.watch(prefix, after=after):
            self.batches.append(batch)
            self._changed.set()

    @property
    def revision(self) -> int:
        return self.batches[-1].revision if self.batches else 0

    async def wait_revision(self, revision: int) -> None:
        async with asyncio.timeout(WAIT):
            while self.revision < revision:
                self._changed.clear()
                await self._changed.wait()

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


async def started_watch(store: EtcdStorage, prefix: str = "/registry/") -> Collector:
    collector = Collector(store, prefix, await store.current_revision())
    # the watch counts once its generator runs; give the task a moment to start
    async with asyncio.timeout(WAIT):
        while not store._fence.watches:
            await asyncio.sleep(0.01)
    return collector


async def test_progress_request_reaches_a_revision_moved_under_another_prefix(quiet_etcd: EtcdCluster) -> None:
    async with open_store(quiet_etcd) as store, open_store(quiet_etcd) as other:
        watch = await started_watch(store)
        try:
            await store.create("/registry/pods/ns/a", b"{}")
            for i in range(5):
                await other.create(f"/registry/pods/ns/o{i}", b"{}")
            current = await store.current_revision()
            assert watch.revision < current  # the foreign writes are invisible to the watch

            await store.request_progress()
            await watch.wait_revision(current)

            progress = [b for b in watch.batches if not b.events]
            assert progress and progress[-1].revision >= current
            keys = [e.kv.key for b in watch.batches for e in b.events]
            assert keys == ["/registry/pods/ns/a"]
        finally:
            await watch.close()


async def test_progress_never_overtakes_events_written_concurrently(quiet_etcd: EtcdCluster) -> None:
    async with open_store(quiet_etcd) as store:
        watch = await started_watch(store)
        try:
            async def writer(w: int) -> None:
                for i in range(40):
                    await store.create(f"/registry/configmaps/ns/w{w}-{i}", b"{}")

            async def prober() -> None:
                for _ in range(40):
                    await store.request_progress()

            await asyncio.gather(*(writer(w) for w in range(4)), prober())
            await store.request_progress()
            await watch.wait_revision(await store.current_revision())

            delivered = 0
            for batch in watch.batches:
                for event in batch.events:
                    assert event.revision > delivered, "an event arrived after progress past it"
                assert batch.revision >= delivered
                delivered = batch.revision
            assert sum(len(b.events) for b in watch.batches) == 160
        finally:
            await watch.close()


async def test_fence_key_is_never_listed_nor_delivered_as_an_event(quiet_etcd: EtcdCluster) -> None:
    async with open_store(quiet_etcd) as store:
        everything = Collector(store, "", await store.current_revision())  # "" also holds the fence
        watch = await started_watch(store)
        try:
            await store.create("/registry/pods/ns/a", b"{}")
            await store.request_progress()
            current = await store.current_revision()
            await watch.wait_revision(current)
            await everything.wait_revision(current)

            for collector in (watch, everything):
                assert [e.kv.key for b in collector.batches for e in b.events] == ["/registry/pods/ns/a"]
            for prefix in ("", "/", "/registry/"):
                listed = await store.list(prefix)
                assert [kv.key for kv in listed.kvs] == ["/registry/pods/ns/a"]
        finally:
            await everything.close()
            await watch.close()


async def test_request_progress_without_a_whole_store_watch_writes_nothing(quiet_etcd: EtcdCluster) -> None:
    async with open_store(quiet_etcd) as store:
        narrow = Collector(store, "/registry/pods/", await store.current_revision())
        try:
            await asyncio.sleep(0.05)
            before = await store.current_revision()
            await store.request_progress()
            assert await store.current_revision() == before
        finally:
            await narrow.close()


async def test_concurrent_progress_requests_share_fence_writes(quiet_etcd: EtcdCluster) -> None:
    async with open_store(quiet_etcd) as store:
        watch = await started_watch(store)
        try:
            before = await store.current_revision()
            await asyncio.gather(*(store.request_progress() for _ in range(50)))
            after = await store.current_revision()
            assert 1 <= after - before <= 2  # one put in flight, one queued behind it
            await watch.wait_revision(after)
        finally:
            await watch.close()
