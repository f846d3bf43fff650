"""Fixtures for the storage tests: one ``storage`` fixture, run over every backend.

To add a backend, write an async factory that takes the test's ``tmp_path``
and returns a *started*, *empty* store, then register it in
``BACKEND_FACTORIES`` below; ``test_contract.py`` then runs against it too.
Factories should configure progress notifications at least every second (the
contract tests wait for one) and no background compaction within a test.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path
from typing import AsyncIterator, Awaitable, Callable, Iterator

import pytest

from k8py.cli.etcd import ETCD_BINARY, EtcdCluster, start_etcd_cluster
from k8py.storage.etcd import EtcdStorage
from k8py.storage.interface import Storage
from k8py.storage.sqlite import SqliteStorage
from tests.support.etcd import session_etcd
from tests.support.fake_storage import MemoryStorage

BackendFactory = Callable[[Path], Awaitable[Storage]]


async def open_sqlite(tmp_path: Path) -> Storage:
    store = SqliteStorage(str(tmp_path / "store.db"), progress_interval=0.2, compaction_interval=3600)
    await store.start()
    return store


async def open_etcd(tmp_path: Path) -> Storage:
    """A store under a fresh etcd key prefix of the session's etcd process."""
    if not os.path.exists(ETCD_BINARY):
        pytest.skip(f"etcd not installed (looked for {ETCD_BINARY})")
    cluster = await asyncio.to_thread(session_etcd)  # one etcd for the whole session, started on first use
    store = EtcdStorage(
        cluster.client_urls,
        prefix=f"/test-{uuid.uuid4().hex[:12]}/registry",
        compaction_interval=None,
    )
    await store.start()
    return store


async def open_memory(tmp_path: Path) -> Storage:
    """The in-memory fake the API server's unit tests use (``tests/support/fake_storage``):
    it must keep the same contract."""
    store = MemoryStorage(progress_interval=0.2)
    await store.start()
    return store


# name -> factory. The etcd backend registers itself here as "etcd".
BACKEND_FACTORIES: dict[str, BackendFactory] = {
    "sqlite": open_sqlite,
    "etcd": open_etcd,
    "memory": open_memory,
}


# The etcd variants carry the ``etcd`` mark, so ``-m "not etcd"`` runs without etcd.
@pytest.fixture(
    params=[
        pytest.param(name, marks=[pytest.mark.etcd] if name == "etcd" else [])
        for name in sorted(BACKEND_FACTORIES)
    ]
)
async def storage(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Storage]:
    store = await BACKEND_FACTORIES[request.param](tmp_path)
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture(scope="module")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    """A private one-member etcd for one test module (tests that need their
    own process, e.g. to read it with a raw client or to stop it)."""
    cluster = start_etcd_cluster(str(tmp_path_factory.mktemp("etcd")))
    try:
        yield cluster
    finally:
        cluster.stop()
