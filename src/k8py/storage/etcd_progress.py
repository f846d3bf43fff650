"""Progress on demand for etcd watches: the fence write behind
``EtcdStorage.request_progress``.

What it gives: after ``request()`` returns, every live watch of the whole
``/registry/`` space delivers, soon, a progress batch at a revision >= the
store's revision when ``request()`` was called. A consistent read needs that
to learn its cache has caught up when the newest revisions belong to keys
outside our prefix (etcd's revision is global, and periodic progress
notifications come every second at best).

How: one put of the fence key ``P0`` (``etcd_keys``). Watches of the whole
key space have their range widened by that one key, and ``etcd_watch``
passes its events on as empty batches at the put's revision. etcd delivers a
watcher's events in revision order, so when the fence arrives everything
before it has arrived too. Concurrent calls share puts: one put in flight and
one queued behind it, which every later caller joins; the queued put is sent
only after each of its callers read the revision it waits for.

Why a write and not etcd's ``WatchRequest{progress_request}`` (KEP-2340, what
kube-apiserver 1.31 uses), measured on etcd 3.4.23:

- the JSON gateway's ``POST /v3/watch`` reads the *whole* request body before
  it answers: while a chunked body (or a short Content-Length body) is still
  open not even the ``created`` response comes back, so no progress request
  can follow the create request on a live POST watch. A WebSocket on
  ``/v3/watch`` (etcd's grpc-websocket-proxy) does stream both ways and
  answers a progress request at once (``watch_id: -1``, the current header
  revision, no events);
- but etcd before 3.4.31 / 3.5.13 answers it out of band, at the store's
  revision, beside events still queued for the stream: with 8 writers and
  400 progress requests, 2 events arrived *after* a progress answer at or
  above their revision. kube-apiserver refuses the feature on those versions
  and reads etcd instead. Here it would be worse than stale: ``etcd_watch``
  drops events at or below a revision it has already delivered.
- a second, short-lived watch cannot stand in: two watch streams are not
  ordered with each other, and 3.4 has no per-watch progress interval (only
  the server-wide ``--experimental-watch-progress-notify-interval``).

Costs and caveats: one etcd write (raft round, fsync) per batch of
consistent reads that find their cache behind; each fence advances etcd's
revision and adds one tiny key version (compacted like any other). Nothing
but this module may write the fence key. Once etcd >= 3.4.31 is the floor,
the WebSocket progress request can replace the write behind the same method.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

from k8py.storage.etcd_client import EtcdError, EtcdHttpClient, b64
from k8py.storage.etcd_keys import EtcdKeySpace
from k8py.storage.interface import StorageError, WatchBatch

__all__ = ["ProgressFence"]


class ProgressFence:
    """The fence of one key space: counts the watches that see it, writes it."""

    def __init__(self, client: EtcdHttpClient, keys: EtcdKeySpace) -> None:
        self._client = client
        self._body = {"key": b64(keys.fence)}
        self._watches = 0  # live watches whose range holds the fence
        self._running: asyncio.Task[None] | None = None
        self._queued: asyncio.Task[None] | None = None

    @property
    def watches(self) -> int:
        return self._watches

    async def counted(self, source: AsyncGenerator[WatchBatch, None]) -> AsyncGenerator[WatchBatch, None]:
        """``source`` (a watch that sees the fence), counted while iterated."""
        self._watches += 1
        try:
            async for batch in source:
                yield batch
        finally:
            self._watches -= 1
            await source.aclose()

    async def request(self) -> None:
        """Write a fence sent after this call began (shared with concurrent
        callers); a no-op when no watch would see it. Raises StorageError."""
        if not self._watches:
            return
        queued = self._queued
        if queued is None:
            queued = self._queued = asyncio.get_running_loop().create_task(
                self._write(self._running), name="etcd-progress-fence"
            )
            # its failure reaches the callers; mark it seen if they all left
            queued.add_done_callback(lambda t: t.cancelled() or t.exception())
        # shielded: one caller giving up must not cancel the others' fence
        await asyncio.shield(queued)

    async def _write(self, previous: asyncio.Task[None] | None) -> None:
        if previous is not None:
            await asyncio.wait([previous])
        # from here on, callers that join would have read their revision
        # after this put may be sent: they queue the next one
        self._running, self._queued = self._queued, None
        try:
            await self._client.post("/kv/put", self._body)
        except EtcdError as e:
            raise StorageError(e.message) from e

    async def close(self) -> None:
        tasks = [t for t in (self._running, self._queued) if t is not None]
        self._running = self._queued = None
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
