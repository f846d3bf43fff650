"""EtcdStorage on a 3-member etcd cluster while members are SIGKILLed.

A writer creates keys through a store given all three member URLs and
records every acknowledged write; a watcher runs from before the first write.
We kill the leader (which is also the member the store talks to), wait for
writes to resume on the new leader, restart it, then kill the follower the
store is using and restart that too. At the end:

- every acknowledged write is in etcd, with the revision we were told;
- the watch, which had to resume on other members, saw every acknowledged
  write exactly once, and all its events in strictly increasing revision order;
- the killed members rejoined (all three healthy, one leader).
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator

import pytest

from k8py.cli.etcd import ETCD_BINARY, EtcdCluster, start_etcd_cluster
from k8py.storage.etcd import EtcdStorage
from k8py.storage.interface import WatchEvent

pytestmark = [
    pytest.mark.etcd,
    pytest.mark.slow,
    pytest.mark.timeout(90),
    pytest.mark.skipif(not os.path.exists(ETCD_BINARY), reason="etcd not installed"),
]


@pytest.fixture
def cluster(tmp_path: os.PathLike[str]) -> Iterator[EtcdCluster]:
    c = start_etcd_cluster(str(tmp_path), members=3)
    try:
        yield c
    finally:
        for i in range(3):
            c.kill(i, signal.SIGKILL)  # a graceful stop costs seconds of leader transfer


async def wait_for_acks(acked: dict[str, int], count: int, *, timeout: float) -> None:
    target = len(acked) + count
    async with asyncio.timeout(timeout):
        while len(acked) < target:
            await asyncio.sleep(0.02)


async def test_writes_and_a_watch_survive_killing_the_leader_then_a_follower(
    cluster: EtcdCluster,
) -> None:
    leader = cluster.leader_index()
    assert leader is not None
    # The leader first, so the store starts out talking to the member we kill.
    order = [leader] + [i for i in range(3) if i != leader]
    store = EtcdStorage(
        [cluster.client_urls[i] for i in order],
        prefix="/failover/registry",
        request_timeout=1.0,
        retry_timeout=20.0,
        compaction_interval=None,
    )
    await store.start()
    start = await store.current_revision()
    acked: dict[str, int] = {}  # key -> acknowledged mod_revision
    ack_times: list[float] = []
    loop = asyncio.get_running_loop()
    seen: list[WatchEvent] = []
    stop_writing = asyncio.Event()

    async def write() -> None:
        i = 0
        while not stop_writing.is_set():
            key = f"/registry/configmaps/default/cm-{i:06d}"
            kv = await store.create(key, f"value {i}".encode())
            acked[key] = kv.mod_revision
            ack_times.append(loop.time())
            i += 1

    async def watch() -> None:
        async for batch in store.watch("/registry/configmaps/", after=start):
            seen.extend(batch.events)

    writer = asyncio.create_task(write(), name="failover-writer")
    watcher = asyncio.create_task(watch(), name="failover-watcher")
    try:
        await wait_for_acks(acked, 50, timeout=10)

        cluster.kill(leader, signal.SIGKILL)
        await wait_for_acks(acked, 50, timeout=15)  # after the election pause
        assert store.current_endpoint != cluster.client_urls[leader]
        await asyncio.to_thread(cluster.restart, leader)

        used = cluster.client_urls.index(store.current_endpoint)
        follower = used if used != cluster.leader_index() else (used + 1) % 3
        if follower == cluster.leader_index():
            follower = (follower + 1) % 3
        cluster.kill(follower, signal.SIGKILL)
        await wait_for_acks(acked, 50, timeout=15)
        await asyncio.to_thread(cluster.restart, follower)
        await wait_for_acks(acked, 20, timeout=10)

        stop_writing.set()
        await asyncio.wait_for(writer, 10)
        last = max(acked.values())
        async with asyncio.timeout(10):
            while not seen or seen[-1].revision < last:
                await asyncio.sleep(0.05)
    finally:
        stop_writing.set()
        writer.cancel()
        watcher.cancel()
        await asyncio.wait([writer, watcher])

    gaps = sorted(b - a for a, b in zip(ack_times, ack_times[1:]))
    print(f"acked={len(acked)} longest write pauses: {[round(g, 2) for g in gaps[-3:]]} s")
    try:
        stored = {kv.key: kv.mod_revision for kv in (await store.list("/registry/configmaps/")).kvs}
        assert all(stored.get(key) == rev for key, rev in acked.items())

        revisions = [e.revision for e in seen]
        assert revisions == sorted(set(revisions)), "watch events repeated or out of order"
        watched = {e.kv.key: e.revision for e in seen}
        assert len(watched) == len(seen), "a key was delivered twice"
        assert all(watched.get(key) == rev for key, rev in acked.items())
        # Writes that committed but whose acknowledgement was lost show up in
        # the store and the watch, never as a second copy.
        assert set(watched) == set(stored)
    finally:
        await store.close()

    await asyncio.to_thread(cluster.wait_healthy, timeout=15)
    assert all(cluster.healthy(i) for i in range(3))
    assert cluster.leader_index() is not None
