"""``Storage.request_progress`` on the SQLite store (etcd's: ``test_etcd_progress``).

The store's idle-progress timer is set to an hour, so a progress batch seen
here can only have come from the request.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from k8py.storage import StorageUnavailableError
from k8py.storage.sqlite import SqliteStorage


async def _next_batch(stream, timeout: float = 10.0):
    async with asyncio.timeout(timeout):
        return await anext(stream)


async def test_a_progress_request_reaches_every_live_watch_at_the_current_revision(tmp_path: Path) -> None:
    store = SqliteStorage(str(tmp_path / "s.db"), progress_interval=3600, compaction_interval=3600)
    await store.start()
    try:
        await store.create("/registry/pods/a", b"v")
        streams = [store.watch("/registry/", after=0), store.watch("/registry/pods/", after=0)]
        try:
            for stream in streams:
                replayed = await _next_batch(stream)
                assert [e.kv.key for e in replayed.events] == ["/registry/pods/a"]
                assert (await _next_batch(stream)).events == ()  # replay done: live from here
            current = (await store.create("/registry/pods/b", b"v")).mod_revision
            for stream in streams:
                assert [e.kv.key for e in (await _next_batch(stream)).events] == ["/registry/pods/b"]
            await store.request_progress()
            for stream in streams:
                progress = await _next_batch(stream)
                assert progress.events == ()
                assert progress.revision >= current
        finally:
            for stream in streams:
                with contextlib.suppress(Exception):
                    await stream.aclose()
    finally:
        await store.close()


async def test_a_progress_request_on_a_closed_store_is_a_storage_error(tmp_path: Path) -> None:
    store = SqliteStorage(str(tmp_path / "s.db"), compaction_interval=3600)
    await store.start()
    await store.close()
    with pytest.raises(StorageUnavailableError):
        await store.request_progress()
