"""Copy a cluster's state from one store to another (``k8py migrate``).

Typical use: move a single-node cluster from its embedded SQLite store to etcd
when it grows to several API servers, or back.

What is kept and what is not:

- every key under ``/registry/`` is copied with its value byte for byte, so
  each object keeps its uid, labels, annotations, spec, status and even the
  ``metadata.resourceVersion`` field *inside* the stored JSON;
- revisions are not kept and cannot be: the target assigns its own
  (``mod_revision`` is the target's write order). The API server overwrites an
  object's resourceVersion from the store's revision when it reads it, so
  clients see new resourceVersions: their watches must re-list (they get 410
  Gone for the old ones), exactly as after an etcd restore in Kubernetes;
- history is not copied: only the state at one revision of the source.

The source is read at one revision (the first page's), so the copy is a
consistent snapshot; writes made to the source during the copy are not in it,
so stop the API servers first. A non-empty target is refused unless
``overwrite`` is set; then the target ends up holding exactly the source's
keys (existing keys are replaced, keys absent from the source are deleted).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable

from k8py.storage.interface import KeyExistsError, Storage

__all__ = ["migrate", "TargetNotEmptyError", "open_store", "add_parser", "run"]

ROOT = "/registry/"
Progress = Callable[[int, int], None]  # (keys copied so far, keys in the source)


class TargetNotEmptyError(Exception):
    def __init__(self, count: int) -> None:
        super().__init__(f"the target store already holds {count} keys under {ROOT} (use overwrite)")
        self.count = count


async def migrate(
    source: Storage,
    target: Storage,
    *,
    progress: Progress | None = None,
    overwrite: bool = False,
    page_size: int = 500,
    concurrency: int = 16,
) -> int:
    """Copy every key under ``/registry/`` from ``source`` to ``target``;
    returns the number of keys copied. Both stores must be started."""
    existing = await target.count(ROOT)
    if existing and not overwrite:
        raise TargetNotEmptyError(existing)
    total = await source.count(ROOT)
    copied = 0
    copied_keys: set[str] = set()
    limit = asyncio.Semaphore(concurrency)

    async def copy(key: str, value: bytes) -> None:
        async with limit:
            try:
                await target.create(key, value)
            except KeyExistsError:
                if not overwrite:
                    raise
                await target.update(key, value, expected_revision=0)

    revision, start_after = 0, ""
    while True:
        page = await source.list(ROOT, revision=revision, limit=page_size, start_after=start_after)
        revision = page.revision
        async with asyncio.TaskGroup() as tg:
            for kv in page.kvs:
                tg.create_task(copy(kv.key, kv.value), name=f"migrate {kv.key}")
        copied += len(page.kvs)
        copied_keys.update(kv.key for kv in page.kvs)
        if progress is not None:
            progress(copied, max(total, copied))
        if not page.more or not page.kvs:
            break
        start_after = page.kvs[-1].key

    if existing:
        for kv in (await target.list(ROOT)).kvs:
            if kv.key not in copied_keys:
                await target.delete(kv.key, expected_revision=kv.mod_revision)
    return copied


def open_store(spec: str, *, etcd_prefix: str = "/registry", create: bool = False) -> Storage:
    """A store from a CLI spec: comma-separated ``http(s)://`` URLs mean etcd
    members; anything else is a directory holding the SQLite store."""
    if spec.startswith(("http://", "https://")):
        from k8py.storage.etcd import EtcdStorage

        return EtcdStorage(spec.split(","), prefix=etcd_prefix, compaction_interval=None)
    from k8py.storage.sqlite import SqliteStorage

    path = os.path.join(spec, "k8py.db")
    if not create and not os.path.exists(path):
        raise FileNotFoundError(f"no k8py store at {path}")
    os.makedirs(spec, exist_ok=True)
    # No background compaction while we read at one revision.
    return SqliteStorage(path, compaction_interval=24 * 3600.0)


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:  # type: ignore[type-arg]
    """Register ``k8py migrate`` on an ``argparse`` subparsers object."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "migrate", help="copy every object from one store to another (SQLite dir or etcd URLs)"
    )
    p.add_argument("--from", dest="source", required=True, metavar="DIR|URLS",
                   help="source: a data directory (SQLite) or comma-separated etcd URLs")
    p.add_argument("--to", dest="target", required=True, metavar="URLS|DIR",
                   help="target: comma-separated etcd URLs or a data directory (SQLite)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace a non-empty target's contents with the source's")
    p.add_argument("--etcd-prefix", default="/registry", help="etcd key prefix (both sides)")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_run(args))


async def _run(args: argparse.Namespace) -> int:
    source = open_store(args.source, etcd_prefix=args.etcd_prefix)
    target = open_store(args.target, etcd_prefix=args.etcd_prefix, create=True)

    def show(copied: int, total: int) -> None:
        print(f"\rcopied {copied}/{total} keys", end="", file=sys.stderr, flush=True)

    await source.start()
    try:
        await target.start()
        try:
            copied = await migrate(source, target, progress=show, overwrite=args.overwrite)
        except TargetNotEmptyError as e:
            print(f"k8py migrate: {e}", file=sys.stderr)
            return 1
        finally:
            await target.close()
    finally:
        await source.close()
    print(f"\nmigrated {copied} keys from {args.source} to {args.target}", file=sys.stderr)
    print("resourceVersions changed: clients must re-list", file=sys.stderr)
    return 0
