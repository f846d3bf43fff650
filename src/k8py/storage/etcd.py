"""The Storage contract on etcd v3 (``EtcdStorage``).

Mapping (etcd is the model the contract was written in, so it is direct):

- keys: see ``etcd_keys`` (contract ``/registry/...`` under a configurable
  etcd prefix, identity for the default ``/registry``);
- resourceVersion = etcd ``mod_revision``; revisions are etcd's global ones,
  so they skip numbers when other clients write elsewhere in the same etcd;
- create = ``txn(create_revision == 0 -> put, else range)``; update and delete
  = ``txn(mod_revision == expected -> put/delete, else range)``; the failure
  branch's read fills ``RevisionConflictError.current`` in the same round trip.
  Unconditional update/delete read the key first and then run guarded, so
  *every* write is conditional (below);
- list = paged ``range`` at one revision (pages of ``page_size`` keys, never
  one giant response and no ``fragment``), ``more`` and ``count`` from etcd;
- watch = the gateway's watch stream with ``prev_kv`` and ``progress_notify``;
  a response without events is a progress notification (an empty WatchBatch);
  a cancel carrying ``compact_revision`` is CompactedError;
- compaction = ``/kv/compaction``, plus an optional background compactor that,
  like kube-apiserver's, every ``compaction_interval`` seconds compacts to the
  revision it saw one interval earlier.

Client choice: etcd's JSON gRPC gateway over aiohttp (``etcd_client``): it is
the only measured client that delivers progress notifications, and it lets us
fail over between members; see that module's docstring for the figures.

Failover and ambiguous writes. A write whose answer was lost (member killed,
timeout) may have committed. Retries are always the same *guarded* txn, and a
failed guard after such a loss is examined before being reported:

- create: the key now exists with exactly our value -> success;
- update: the key's mod_revision moved past ``expected`` and it holds exactly
  our value -> success;
- delete: the key is gone (or was re-created) -> look up the first change
  after ``expected`` with a one-shot watch; a DELETE there is our delete.

Writing the same bytes concurrently from two writers is indistinguishable
from this; for the API server (values carry a uid and resourceVersion-guarded
content) it does not arise in practice.

A watch that breaks is resumed, on the next member, from the last revision it
delivered + 1; events at or below that revision are dropped, so the consumer
sees each event exactly once and in order (``etcd_watch``).

Caveat (etcd 3.4): progress notifications are only as good as etcd's; 3.4
releases before 3.4.25 may rarely send one ahead of pending events (etcd
issue #15220). Revisions delivered downstream are still kept monotonic.

``request_progress()`` (part of the Storage contract; the cacher asks for
it): every live watch of the whole ``/registry/`` space soon delivers a
progress batch at a revision >= the store's revision at the call, so a
consistent read can be served from a watch cache although etcd's newest
revisions belong to other prefixes. It is a *fence write*, not etcd's
progress request: see ``etcd_progress`` for why
(the gateway cannot stream requests on a POST watch, and etcd < 3.4.31
answers progress requests ahead of queued events).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from k8py.storage.etcd_client import EtcdError, EtcdHttpClient, b64
from k8py.storage.etcd_keys import EtcdKeySpace
from k8py.storage.etcd_progress import ProgressFence
from k8py.storage.etcd_watch import (
    decode_kv,
    find_compacted_revision,
    first_change_after,
    resuming_watch,
)
from k8py.storage.interface import (
    CompactedError,
    EventType,
    FutureRevisionError,
    KeyExistsError,
    KeyNotFoundError,
    KeyValue,
    ListResult,
    RevisionConflictError,
    StorageError,
    StorageUnavailableError,
    ValueTooLargeError,
    WatchBatch,
)

__all__ = ["EtcdStorage"]

log = logging.getLogger(__name__)

_COMPACTED = "required revision has been compacted"
_FUTURE = "required revision is a future revision"
_TOO_LARGE = "request is too large"
_UNGUARDED_ATTEMPTS = 32  # bound on read-then-guarded-write loops under contention


class EtcdStorage:
    """``Storage`` on an etcd v3 cluster reached at ``endpoints`` (member URLs)."""

    def __init__(
        self,
        endpoints: list[str],
        *,
        prefix: str = "/registry",
        request_timeout: float = 5.0,
        retry_timeout: float = 30.0,
        compaction_interval: float | None = 300.0,
        page_size: int = 1000,
        max_value_bytes: int = 1_572_864,
    ) -> None:
        self._keys = EtcdKeySpace(prefix)
        self._fence_key = self._keys.from_etcd(self._keys.fence)
        self._client = EtcdHttpClient(
            endpoints, request_timeout=request_timeout, retry_timeout=retry_timeout
        )
        self._fence = ProgressFence(self._client, self._keys)
        self._compaction_interval = compaction_interval
        self._page_size = page_size
        self._max_value_bytes = max_value_bytes
        self._compactor: asyncio.Task[None] | None = None
        self._started = False

    @property
    def current_endpoint(self) -> str:
        """The member URL requests currently go to (changes on failover)."""
        return self._client.current_endpoint

    # -- lifecycle ---------------------------------------------------------

    async def start(self) -> None:
        if self._started:
            return
        await self._client.start()
        self._started = True
        if self._compaction_interval:
            self._compactor = asyncio.create_task(
                self._compact_periodically(self._compaction_interval), name="etcd-compactor"
            )

    async def close(self) -> None:
        if self._compactor is not None:
            task, self._compactor = self._compactor, None
            task.cancel()
            await asyncio.wait([task])
        await self._fence.close()
        self._started = False
        await self._client.close()

    # -- reads -------------------------------------------------------------

    async def current_revision(self) -> int:
        data = await self._range(self._keys.to_etcd("/registry"), count_only=True)
        return int(data["header"]["revision"])

    async def compacted_revision(self) -> int:
        try:
            await self._range(self._keys.to_etcd("/registry"), revision=1, count_only=True)
            return 0
        except CompactedError as e:
            return e.compacted

    async def get(self, key: str, *, revision: int = 0) -> KeyValue | None:
        data = await self._range(self._keys.to_etcd(key), revision=revision)
        kvs = data.get("kvs")
        return decode_kv(self._keys, kvs[0]) if kvs else None

    async def list(
        self,
        prefix: str,
        *,
        revision: int = 0,
        limit: int = 0,
        start_after: str = "",
    ) -> ListResult:
        rng = self._keys.range_after(prefix, start_after)
        if rng is None:
            if revision:
                await self._range(self._keys.to_etcd("/registry"), revision=revision, count_only=True)
            return ListResult([], revision or await self.current_revision(), False)
        start, end = rng
        kvs: list[KeyValue] = []
        read_at = revision
        while True:
            want = self._page_size if not limit else min(self._page_size, limit - len(kvs))
            data = await self._range(start, end, revision=read_at, limit=want)
            read_at = read_at or int(data["header"]["revision"])
            page = [decode_kv(self._keys, kv) for kv in data.get("kvs", ())]
            kvs.extend(kv for kv in page if kv.key != self._fence_key)
            more = bool(data.get("more"))
            remaining = int(data.get("count", 0)) - len(page)
            if not more or (limit and len(kvs) >= limit):
                break
            start = self._keys.to_etcd(page[-1].key) + b"\0"
        return ListResult(kvs, read_at, more, max(remaining, 0))

    async def count(self, prefix: str) -> int:
        rng = self._keys.prefix_range(prefix)
        if rng is None:
            return 0
        data = await self._range(rng[0], rng[1], count_only=True)
        return int(data.get("count", 0))

    # -- writes ------------------------------------------------------------

    async def create(self, key: str, value: bytes) -> KeyValue:
        self._check_size(value)
        ekey = b64(self._keys.to_etcd(key))
        result = await self._txn(
            {"target": "CREATE", "key": ekey, "result": "EQUAL", "create_revision": "0"},
            {"request_put": {"key": ekey, "value": b64(value)}},
            ekey,
            size=len(value),
        )
        data = result.data
        if data.get("succeeded"):
            revision = int(data["header"]["revision"])
            return KeyValue(key, value, revision, revision)
        current = self._failure_kv(data)
        if result.maybe_applied_before and current is not None and current.value == value:
            return current  # our earlier attempt committed
        raise KeyExistsError(key)

    async def update(self, key: str, value: bytes, *, expected_revision: int) -> KeyValue:
        self._check_size(value)
        if expected_revision:
            return await self._guarded_update(key, value, expected_revision)
        current = await self.get(key)
        for _ in range(_UNGUARDED_ATTEMPTS):
            if current is None:
                raise KeyNotFoundError(key)
            try:
                return await self._guarded_update(key, value, current.mod_revision)
            except RevisionConflictError as e:
                current = e.current
        raise StorageUnavailableError(f"update of {key} kept conflicting")

    async def delete(self, key: str, *, expected_revision: int = 0) -> KeyValue:
        if expected_revision:
            return await self._guarded_delete(key, expected_revision)
        current = await self.get(key)
        for _ in range(_UNGUARDED_ATTEMPTS):
            if current is None:
                raise KeyNotFoundError(key)
            try:
                return await self._guarded_delete(key, current.mod_revision)
            except RevisionConflictError as e:
                current = e.current
        raise StorageUnavailableError(f"delete of {key} kept conflicting")

    async def _guarded_update(self, key: str, value: bytes, expected: int) -> KeyValue:
        ekey = b64(self._keys.to_etcd(key))
        result = await self._txn(
            {"target": "MOD", "key": ekey, "result": "EQUAL", "mod_revision": str(expected)},
            {"request_put": {"key": ekey, "value": b64(value), "prev_kv": True}},
            ekey,
            size=len(value),
        )
        data = result.data
        if data.get("succeeded"):
            prev = data["responses"][0]["response_put"].get("prev_kv")
            revision = int(data["header"]["revision"])
            created = int(prev["create_revision"]) if prev else revision
            return KeyValue(key, value, created, revision)
        current = self._failure_kv(data)
        if current is None:
            raise KeyNotFoundError(key)
        if (
            result.maybe_applied_before
            and current.mod_revision > expected
            and current.value == value
        ):
            return current  # our earlier attempt committed
        raise RevisionConflictError(key, expected, current)

    async def _guarded_delete(self, key: str, expected: int) -> KeyValue:
        ekey = b64(self._keys.to_etcd(key))
        result = await self._txn(
            {"target": "MOD", "key": ekey, "result": "EQUAL", "mod_revision": str(expected)},
            {"request_delete_range": {"key": ekey, "prev_kv": True}},
            ekey,
        )
        data = result.data
        if data.get("succeeded"):
            prev = decode_kv(self._keys, data["responses"][0]["response_delete_range"]["prev_kvs"][0])
            revision = int(data["header"]["revision"])
            return KeyValue(key, prev.value, prev.create_revision, revision)
        current = self._failure_kv(data)
        if result.maybe_applied_before and (current is None or current.create_revision > expected):
            deleted = await first_change_after(self._client, self._keys, key, expected)
            if deleted is not None and deleted.type is EventType.DELETE:
                return deleted.kv  # our earlier attempt committed
        if current is None:
            raise KeyNotFoundError(key)
        raise RevisionConflictError(key, expected, current)

    async def compact(self, revision: int) -> None:
        if revision <= 0:
            return
        try:
            await self._client.post("/kv/compaction", {"revision": str(revision)})
        except EtcdError as e:
            if _COMPACTED in e.message:
                return  # at or below the compacted revision: a no-op
            if _FUTURE in e.message:
                raise FutureRevisionError(revision, await self.current_revision()) from None
            raise StorageError(e.message) from e

    # -- watch -------------------------------------------------------------

    def watch(self, prefix: str, *, after: int) -> AsyncIterator[WatchBatch]:
        rng = self._keys.watch_range(prefix)
        if rng is None:
            raise ValueError(f"watch prefix outside the /registry key space: {prefix!r}")
        start, end = rng
        if not self._keys.covers_fence(start, end):
            return resuming_watch(self._client, self._keys, start, end, after=after)
        return self._fence.counted(
            resuming_watch(self._client, self._keys, start, end, after=after, fence=self._keys.fence)
        )

    async def request_progress(self) -> None:
        """Make every live watch of the whole key space deliver a progress
        batch at a revision >= the store's revision at this call (a fence
        write, ``etcd_progress``). Returns once the fence is written, before
        the watches deliver it; a no-op when no such watch is live. Raises
        StorageError when the write fails."""
        await self._fence.request()

    # -- helpers -----------------------------------------------------------

    async def _range(
        self,
        key: bytes,
        range_end: bytes | None = None,
        *,
        revision: int = 0,
        limit: int = 0,
        count_only: bool = False,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"key": b64(key)}
        if range_end is not None:
            body["range_end"] = b64(range_end)
        if revision:
            body["revision"] = str(revision)
        if limit:
            body["limit"] = str(limit)
        if count_only:
            body["count_only"] = True
        try:
            return (await self._client.post("/kv/range", body)).data
        except EtcdError as e:
            if _COMPACTED in e.message:
                raise CompactedError(revision, await find_compacted_revision(self._client, self._keys)) from None
            if _FUTURE in e.message:
                raise FutureRevisionError(revision, await self.current_revision()) from None
            raise StorageError(e.message) from e

    async def _txn(
        self, compare: dict[str, Any], success: dict[str, Any], ekey: str, *, size: int = 0
    ) -> Any:
        body = {
            "compare": [compare],
            "success": [success],
            "failure": [{"request_range": {"key": ekey}}],
        }
        try:
            return await self._client.post("/kv/txn", body)
        except EtcdError as e:
            if _TOO_LARGE in e.message:
                raise ValueTooLargeError(size, self._max_value_bytes) from None
            raise StorageError(e.message) from e

    def _check_size(self, value: bytes) -> None:
        if len(value) > self._max_value_bytes:
            raise ValueTooLargeError(len(value), self._max_value_bytes)

    def _failure_kv(self, data: dict[str, Any]) -> KeyValue | None:
        kvs = data["responses"][0]["response_range"].get("kvs")
        return decode_kv(self._keys, kvs[0]) if kvs else None

    async def _compact_periodically(self, interval: float) -> None:
        """kube-apiserver's policy: compact to the revision seen one interval ago,
        so clients always have at least ``interval`` of history to resume from."""
        seen = 0
        while True:
            await asyncio.sleep(interval)
            try:
                if seen:
                    await self.compact(seen)
                    log.info("etcd compacted", extra={"revision": seen})
                seen = await self.current_revision()
            except StorageError as e:
                log.warning("etcd compaction failed", extra={"error": str(e)})
