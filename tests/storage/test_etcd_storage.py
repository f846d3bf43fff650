"""etcd-specific behaviour of EtcdStorage (the shared contract is in test_contract.py).

One real etcd per module; each test gets its own key prefix. Faults are
injected with a real TCP relay in front of etcd that forwards a request and
then drops the connection before the answer reaches the client, which is
exactly the "write committed, acknowledgement lost" case.
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
import uuid
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import pytest

from k8py.cli.etcd import ETCD_BINARY, EtcdCluster
from k8py.storage.etcd import EtcdStorage
from k8py.storage.etcd_client import EtcdHttpClient, b64, unb64
from k8py.storage.interface import CompactedError, EventType, KeyExistsError, WatchBatch

pytestmark = [
    pytest.mark.etcd,
    pytest.mark.skipif(not os.path.exists(ETCD_BINARY), reason="etcd not installed"),
]


def unique_prefix() -> str:
    return f"/t-{uuid.uuid4().hex[:10]}/registry"


@pytest.fixture
async def store(etcd: EtcdCluster) -> AsyncIterator[EtcdStorage]:
    s = EtcdStorage(etcd.client_urls, prefix=unique_prefix(), compaction_interval=None)
    await s.start()
    try:
        yield s
    finally:
        await s.close()


async def raw_keys(etcd: EtcdCluster, start: str) -> list[str]:
    client = EtcdHttpClient(etcd.client_urls)
    await client.start()
    try:
        end = start[:-1] + chr(ord(start[-1]) + 1)
        data = (await client.post("/kv/range", {"key": b64(start), "range_end": b64(end)})).data
        return [unb64(kv["key"]).decode() for kv in data.get("kvs", ())]
    finally:
        await client.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def start_ack_dropping_relay(target_url: str) -> tuple[asyncio.Server, str]:
    """A relay that delivers each request to etcd, waits for etcd to answer,
    then closes the client connection without passing the answer on."""
    target = urlsplit(target_url)

    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            match = re.search(rb"content-length: *(\d+)", head, re.I)
            body = await reader.readexactly(int(match.group(1))) if match else b""
            up_reader, up_writer = await asyncio.open_connection(target.hostname, target.port)
            up_writer.write(head + body)
            await up_writer.drain()
            await up_reader.read(1)  # etcd has answered: the request was applied
            up_writer.close()
        finally:
            writer.close()

    server = await asyncio.start_server(relay, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}"


# -- key layout --------------------------------------------------------------------


async def test_keys_are_stored_under_the_prefix_in_kubernetes_layout(etcd: EtcdCluster) -> None:
    prefix = unique_prefix()
    s = EtcdStorage(etcd.client_urls, prefix=prefix, compaction_interval=None)
    await s.start()
    try:
        await s.create("/registry/pods/default/web", b"{}")
    finally:
        await s.close()
    assert await raw_keys(etcd, prefix + "/") == [prefix + "/pods/default/web"]


async def test_two_prefixes_share_one_etcd_without_seeing_each_other(etcd: EtcdCluster) -> None:
    blue = EtcdStorage(etcd.client_urls, prefix=unique_prefix(), compaction_interval=None)
    green = EtcdStorage(etcd.client_urls, prefix=unique_prefix(), compaction_interval=None)
    await blue.start()
    await green.start()
    try:
        await blue.create("/registry/pods/a", b"blue")
        await green.create("/registry/pods/a", b"green")
        assert [kv.value for kv in (await blue.list("")).kvs] == [b"blue"]
        assert await green.count("/registry/") == 1
    finally:
        await blue.close()
        await green.close()


def test_a_key_outside_the_registry_key_space_is_rejected() -> None:
    s = EtcdStorage(["http://127.0.0.1:1"])
    with pytest.raises(ValueError):
        s.watch("/elsewhere/", after=0)


# -- list paging ---------------------------------------------------------------------


async def test_an_unlimited_list_is_read_in_pages_at_one_revision(etcd: EtcdCluster) -> None:
    s = EtcdStorage(etcd.client_urls, prefix=unique_prefix(), compaction_interval=None, page_size=3)
    await s.start()
    try:
        written = [await s.create(f"/registry/cm/{i:02d}", b"v") for i in range(10)]
        await s.create("/registry/cm/late", b"v")
        result = await s.list("/registry/cm/", revision=written[-1].mod_revision)
        assert result.kvs == written
        assert result.revision == written[-1].mod_revision
        assert not result.more
        limited = await s.list("/registry/cm/", limit=7)
        assert [kv.key for kv in limited.kvs] == [kv.key for kv in written[:7]]
        assert limited.more and limited.remaining == 4
    finally:
        await s.close()


# -- watch ---------------------------------------------------------------------------


async def test_a_large_watch_catch_up_arrives_complete(store: EtcdStorage) -> None:
    # ~16 MB over 1,600 revisions: etcd sends the first 1,000 revisions as one
    # ~10 MB response line.
    start = await store.current_revision()
    value = b"x" * 10_000
    sem = asyncio.Semaphore(16)

    async def put(i: int) -> None:
        async with sem:
            await store.create(f"/registry/big/{i:05d}", value)

    await asyncio.gather(*(put(i) for i in range(1600)))
    keys: list[str] = []
    stream = store.watch("/registry/big/", after=start)
    async with asyncio.timeout(20):
        async for batch in stream:
            keys.extend(e.kv.key for e in batch.events)
            if len(keys) >= 1600:
                break
    await stream.aclose()  # type: ignore[attr-defined]
    assert sorted(keys) == [f"/registry/big/{i:05d}" for i in range(1600)]
    assert len(set(keys)) == 1600


async def test_a_delete_event_carries_the_last_value_and_the_delete_revision(store: EtcdStorage) -> None:
    kv = await store.create("/registry/pods/a", b"last")
    deleted = await store.delete("/registry/pods/a")
    stream = store.watch("/registry/pods/", after=kv.mod_revision)
    async with asyncio.timeout(5):
        batch: WatchBatch = await anext(stream)
    await stream.aclose()  # type: ignore[attr-defined]
    (event,) = batch.events
    assert event.type is EventType.DELETE
    assert event.kv == deleted
    assert event.kv.value == b"last" and event.kv.mod_revision > kv.mod_revision


async def test_a_watch_ends_when_the_store_closes(etcd: EtcdCluster) -> None:
    s = EtcdStorage(etcd.client_urls, prefix=unique_prefix(), compaction_interval=None)
    await s.start()
    after = await s.current_revision()

    async def consume() -> int:
        n = 0
        async for _ in s.watch("/registry/", after=after):
            n += 1
        return n

    task = asyncio.create_task(consume(), name="watch-consumer")
    await asyncio.sleep(0.2)
    await s.close()
    async with asyncio.timeout(3):
        await task


# -- failover and ambiguous writes ---------------------------------------------------


async def test_requests_fail_over_past_a_dead_member(etcd: EtcdCluster) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    s = EtcdStorage([dead, *etcd.client_urls], prefix=unique_prefix(), compaction_interval=None)
    await s.start()
    try:
        kv = await s.create("/registry/pods/a", b"v")
        assert await s.get("/registry/pods/a") == kv
        assert s.current_endpoint == etcd.client_urls[0]
    finally:
        await s.close()


async def test_writes_whose_acknowledgement_was_lost_succeed_exactly_once(etcd: EtcdCluster) -> None:
    relay, relay_url = await start_ack_dropping_relay(etcd.client_urls[0])
    prefix = unique_prefix()
    direct = EtcdStorage(etcd.client_urls, prefix=prefix, compaction_interval=None)
    await direct.start()
    try:
        start = await direct.current_revision()

        async def through_relay() -> EtcdStorage:
            # The first attempt of each operation goes through the relay and
            # commits unacknowledged; the retry lands on etcd directly.
            s = EtcdStorage([relay_url, etcd.client_urls[0]], prefix=prefix, compaction_interval=None)
            await s.start()
            return s

        s = await through_relay()
        created = await s.create("/registry/pods/a", b"v1")
        await s.close()
        s = await through_relay()
        updated = await s.update("/registry/pods/a", b"v2", expected_revision=created.mod_revision)
        await s.close()
        s = await through_relay()
        deleted = await s.delete("/registry/pods/a", expected_revision=updated.mod_revision)
        await s.close()

        assert created.value == b"v1" and updated.value == b"v2"
        assert deleted.value == b"v2" and deleted.mod_revision > updated.mod_revision
        stream = direct.watch("/registry/pods/", after=start)
        events = []
        async with asyncio.timeout(5):
            while len(events) < 3:
                events.extend((await anext(stream)).events)
        await stream.aclose()  # type: ignore[attr-defined]
        assert [(e.type, e.kv.mod_revision) for e in events] == [
            (EventType.PUT, created.mod_revision),
            (EventType.PUT, updated.mod_revision),
            (EventType.DELETE, deleted.mod_revision),
        ]
        # The guard still rejects a genuine duplicate when nothing was lost.
        await direct.create("/registry/pods/b", b"v")
        with pytest.raises(KeyExistsError):
            await direct.create("/registry/pods/b", b"v")
    finally:
        relay.close()
        await direct.close()


# -- compaction ----------------------------------------------------------------------


async def test_the_background_compactor_compacts_to_the_revision_seen_one_interval_ago(
    etcd: EtcdCluster,
) -> None:
    s = EtcdStorage(etcd.client_urls, prefix=unique_prefix(), compaction_interval=0.3)
    await s.start()
    try:
        first = await s.create("/registry/pods/a", b"v1")
        await asyncio.sleep(0.45)  # the compactor has noted a revision >= first
        second = await s.update("/registry/pods/a", b"v2", expected_revision=first.mod_revision)
        async with asyncio.timeout(5):
            while await s.compacted_revision() < first.mod_revision:
                await asyncio.sleep(0.1)
        assert await s.compacted_revision() < second.mod_revision + 1
        with pytest.raises(CompactedError):
            await s.get("/registry/pods/a", revision=first.mod_revision - 1)
        assert (await s.get("/registry/pods/a")) == second
    finally:
        await s.close()
    assert all(t.get_name() != "etcd-compactor" for t in asyncio.all_tasks())
