"""A consistent list on etcd is served from the watch cache, not from etcd,
even when etcd's newest revisions belong to another prefix.

The session etcd sends periodic progress notifications every second; a list
waits at most ``CACHE_CATCH_UP_TIMEOUT`` (0.25 s) for the cache before it
reads etcd. Without ``request_progress`` a list right after a foreign write
would nearly always read etcd; with it the cacher confirms its revision with
a fence in a few milliseconds. The cacher's counters tell which path a list
took (``fell_behind`` counts the lists that went to the store).
"""

from __future__ import annotations

import asyncio
import time
from typing import Iterator

import orjson
import pytest

from k8py.storage.etcd import EtcdStorage
from tests.support.etcd import etcd_installed, fresh_prefix, session_etcd
from tests.support.kube import official_client
from tests.support.servers import ServerThread

pytestmark = [pytest.mark.etcd, pytest.mark.skipif(not etcd_installed(), reason="etcd not installed")]

TRIES = 10


@pytest.fixture
def server() -> Iterator[ServerThread]:
    urls = session_etcd().client_urls
    prefix = fresh_prefix()
    with ServerThread(lambda: EtcdStorage(urls, prefix=prefix, compaction_interval=None)) as server:
        yield server


async def foreign_writes(count: int) -> None:
    """Move etcd's revision under a prefix no API server watches."""
    other = EtcdStorage(session_etcd().client_urls, prefix=fresh_prefix(), compaction_interval=None)
    await other.start()
    try:
        for i in range(count):
            await other.create(f"/registry/configmaps/default/x{i}", b"{}")
    finally:
        await other.close()


def test_consistent_list_after_foreign_writes_is_served_from_the_cache(server: ServerThread) -> None:
    import kubernetes

    client = official_client(server.url)
    try:
        core = kubernetes.client.CoreV1Api(client)
        core.create_namespaced_config_map("default", {"metadata": {"name": "mine"}})
        assert server.server is not None
        cacher = server.server.cacher
        behind_before = cacher.fell_behind
        caught_before = cacher.caught_up
        took = []
        for _ in range(TRIES):
            asyncio.run(foreign_writes(3))
            start = time.perf_counter()
            listed = core.list_namespaced_config_map("default")
            took.append(time.perf_counter() - start)
            assert [cm.metadata.name for cm in listed.items] == ["mine"]
        # served from the cache each time (the counters say so; wall-clock durations depend on load)
        assert cacher.fell_behind == behind_before, f"lists read etcd: {took}"
        assert cacher.caught_up - caught_before >= TRIES
    finally:
        client.close()


def test_consistent_list_reflects_the_latest_revision_after_foreign_writes(server: ServerThread) -> None:
    """The list's resourceVersion is at least the revision etcd had before
    the list began: the cache confirmed it, it did not serve a stale state."""
    import urllib.request

    assert server.server is not None
    cacher = server.server.cacher
    for i in range(3):
        asyncio.run(foreign_writes(2))
        revision_before = server.call(cacher.storage.current_revision())
        with urllib.request.urlopen(f"{server.url}/api/v1/namespaces/default/configmaps", timeout=5) as resp:
            body = orjson.loads(resp.read())
        assert int(body["metadata"]["resourceVersion"]) >= revision_before
