"""Closing the API server's parts never swallows the caller's cancellation.

The cacher waits for its store watch to wind down; if the task doing the
closing is cancelled meanwhile, that cancellation must reach it (asyncio's
structured cancellation depends on it), and the parts still clean up.
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator

import pytest

from k8py.apiserver.registry import Registry
from k8py.apiserver.resources import register_builtins
from k8py.apiserver.watch.cacher import Cacher
from k8py.storage import WatchBatch
from k8py.storage.sqlite import SqliteStorage


class _SlowToStopWatch:
    """A real SQLite store whose watch takes until ``release`` to wind down once cancelled."""

    def __init__(self, inner: SqliteStorage) -> None:
        self.inner = inner
        self.stopping = asyncio.Event()
        self.release = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def watch(self, prefix: str, *, after: int) -> AsyncIterator[WatchBatch]:
        try:
            async for batch in self.inner.watch(prefix, after=after):
                yield batch
        finally:
            self.stopping.set()
            await asyncio.shield(self.release.wait())


def _registry() -> Registry:
    registry = Registry()
    register_builtins(registry)
    return registry


async def test_cacher_close_lets_the_callers_cancellation_through(tmp_path):
    storage = _SlowToStopWatch(SqliteStorage(str(tmp_path / "k8py.db")))
    await storage.inner.start()
    cacher = Cacher(storage, _registry())  # type: ignore[arg-type]
    await cacher.start()
    try:
        closer = asyncio.create_task(cacher.close(), name="closer")
        await storage.stopping.wait()  # the store watch is winding down
        closer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await closer
        assert closer.cancelled()
    finally:
        storage.release.set()
        await cacher.close()
        await storage.inner.close()
