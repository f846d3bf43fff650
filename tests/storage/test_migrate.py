"""``k8py migrate``: SQLite -> etcd -> SQLite keeps every object's value."""

from __future__ import annotations

import argparse
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest

from k8py.cli import migrate as migrate_cli
from k8py.cli.etcd import ETCD_BINARY, EtcdCluster
from k8py.cli.migrate import TargetNotEmptyError, migrate, open_store
from k8py.storage.etcd import EtcdStorage
from k8py.storage.interface import Storage

pytestmark = [
    pytest.mark.etcd,
    pytest.mark.skipif(not os.path.exists(ETCD_BINARY), reason="etcd not installed"),
]


def pod(i: int) -> bytes:
    return orjson.dumps({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"web-{i}", "namespace": "default", "uid": str(uuid.uuid4()),
                     "labels": {"app": "web", "index": str(i)}, "resourceVersion": str(100 + i)},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]},
        "status": {"phase": "Running", "podIP": f"10.0.0.{i}"},
    })  # fmt: skip


async def started(store: Storage) -> Storage:
    await store.start()
    return store


async def snapshot(store: Storage) -> dict[str, bytes]:
    return {kv.key: kv.value for kv in (await store.list("/registry/")).kvs}


@pytest.fixture
async def stores(tmp_path: Path, etcd: EtcdCluster) -> AsyncIterator[tuple[Storage, Storage, Storage]]:
    first = await started(open_store(str(tmp_path / "a"), create=True))
    middle = await started(
        EtcdStorage(etcd.client_urls, prefix=f"/m-{uuid.uuid4().hex[:8]}/registry",
                    compaction_interval=None)
    )
    last = await started(open_store(str(tmp_path / "b"), create=True))
    try:
        yield first, middle, last
    finally:
        for s in (first, middle, last):
            await s.close()


async def test_sqlite_to_etcd_to_sqlite_keeps_every_value(
    stores: tuple[Storage, Storage, Storage],
) -> None:
    first, middle, last = stores
    for i in range(1200):  # more than two pages
        await first.create(f"/registry/pods/default/web-{i:04d}", pod(i))
    await first.create("/registry/namespaces/default", b'{"kind":"Namespace"}')
    kv = await first.create("/registry/configmaps/default/cm", b"v1")
    await first.update("/registry/configmaps/default/cm", b"v2", expected_revision=kv.mod_revision)
    await first.create("/registry/secrets/default/gone", b"x")
    await first.delete("/registry/secrets/default/gone")
    original = await snapshot(first)
    reports: list[tuple[int, int]] = []

    assert await migrate(first, middle, progress=lambda c, t: reports.append((c, t))) == 1202
    assert await migrate(middle, last) == 1202

    assert await snapshot(middle) == original
    assert await snapshot(last) == original
    web7 = orjson.loads(original["/registry/pods/default/web-0007"])
    assert orjson.loads((await snapshot(last))["/registry/pods/default/web-0007"]) == web7
    assert reports[-1] == (1202, 1202)
    assert [c for c, _ in reports] == sorted(c for c, _ in reports)


async def test_a_non_empty_target_is_refused_unless_overwriting(
    stores: tuple[Storage, Storage, Storage],
) -> None:
    first, middle, _ = stores
    await first.create("/registry/pods/default/a", b"new")
    await middle.create("/registry/pods/default/a", b"old")
    await middle.create("/registry/pods/default/stale", b"old")
    with pytest.raises(TargetNotEmptyError):
        await migrate(first, middle)
    assert await snapshot(middle) == {
        "/registry/pods/default/a": b"old",
        "/registry/pods/default/stale": b"old",
    }
    await migrate(first, middle, overwrite=True)
    assert await snapshot(middle) == {"/registry/pods/default/a": b"new"}


def test_the_cli_copies_a_data_directory_into_etcd(tmp_path: Path, etcd: EtcdCluster) -> None:
    import asyncio

    prefix = f"/cli-{uuid.uuid4().hex[:8]}/registry"

    async def seed() -> None:
        store = await started(open_store(str(tmp_path / "src"), create=True))
        await store.create("/registry/pods/default/a", pod(1))
        await store.close()

    async def read() -> dict[str, bytes]:
        store = await started(EtcdStorage(etcd.client_urls, prefix=prefix, compaction_interval=None))
        try:
            return await snapshot(store)
        finally:
            await store.close()

    asyncio.run(seed())
    parser = argparse.ArgumentParser()
    migrate_cli.add_parser(parser.add_subparsers())
    args = parser.parse_args(
        ["migrate", "--from", str(tmp_path / "src"), "--to", etcd.etcd_servers, "--etcd-prefix", prefix]
    )
    assert args.func(args) == 0
    assert list(asyncio.run(read())) == ["/registry/pods/default/a"]
    assert args.func(args) == 1  # the target is no longer empty
