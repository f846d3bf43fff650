"""etcd watch streams for EtcdStorage: decoding, resumption, one-shot lookups.

``resuming_watch`` turns the gateway's watch responses into WatchBatches and
keeps one logical watch alive across broken streams and members:

- it remembers ``delivered``, the highest revision handed to the consumer (an
  event batch's last revision, or a progress notification's revision);
- when a stream breaks (member killed, connection reset, etcd cancel without a
  compaction), it moves to the next member and re-creates the watch from
  ``delivered + 1``; anything at or below ``delivered`` that arrives again is
  dropped. etcd never splits one revision's events across responses (we do not
  ask for ``fragment``), so whole revisions are either delivered or not;
- a batch's ``revision`` is its last event's revision, not the response
  header's: during catch-up etcd stamps every response with the *current*
  revision although later responses still carry older events;
- a response without events is a progress notification, passed on as an empty
  WatchBatch at the header revision, unless it would go backwards (a lagging
  member after failover); repeats at the same revision pass as liveness
  signals. The ``created`` response is not progress (the watcher may still be
  catching up);
- events on the progress ``fence`` key (``EtcdKeySpace.fence``) are never
  passed on: they only carry the batch's revision, so a response holding
  nothing else becomes a progress batch at the fence's revision. That one is
  ordered like any event (etcd delivers a watcher's events in revision order),
  which is what makes it a safe "caught up" signal, unlike etcd 3.4's answer to
  a ``progress_request`` (see ``EtcdStorage.request_progress``);
- a cancel with ``compact_revision`` is CompactedError; it can happen on the
  first iteration or on a resumption that fell behind a compaction;
- after ``retry_timeout`` without a successfully created stream it gives up
  with StorageUnavailableError; when the client closes, it simply ends.

The one-shot helpers use a watch as etcd's only window on two facts: the
compacted revision (a watch from revision 1 is canceled with it), and what
happened to a key right after a revision (to resolve a delete whose
acknowledgement was lost).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator
from typing import Any

from k8py.storage.etcd_client import EtcdHttpClient, b64, unb64
from k8py.storage.etcd_keys import EtcdKeySpace
from k8py.storage.interface import (
    CompactedError,
    EventType,
    KeyValue,
    StorageUnavailableError,
    WatchBatch,
    WatchEvent,
)

__all__ = ["decode_kv", "decode_event", "resuming_watch", "first_change_after", "find_compacted_revision"]

log = logging.getLogger(__name__)


def decode_kv(keys: EtcdKeySpace, kv: dict[str, Any]) -> KeyValue:
    return KeyValue(
        keys.from_etcd(unb64(kv["key"])),
        unb64(kv.get("value")),
        int(kv.get("create_revision", 0)),
        int(kv.get("mod_revision", 0)),
    )


def decode_event(keys: EtcdKeySpace, event: dict[str, Any]) -> WatchEvent:
    """A gateway event as a contract WatchEvent. A DELETE carries the last
    value (from ``prev_kv``) at the delete's revision."""
    raw_prev = event.get("prev_kv")
    prev = decode_kv(keys, raw_prev) if raw_prev else None
    kv = event["kv"]
    if event.get("type") != "DELETE":  # PUT is the default value, so omitted
        return WatchEvent(EventType.PUT, decode_kv(keys, kv), prev)
    key = keys.from_etcd(unb64(kv["key"]))
    revision = int(kv["mod_revision"])
    if prev is None:  # the previous value was compacted away
        return WatchEvent(EventType.DELETE, KeyValue(key, b"", 0, revision))
    return WatchEvent(EventType.DELETE, KeyValue(key, prev.value, prev.create_revision, revision), prev)


async def resuming_watch(
    client: EtcdHttpClient,
    keys: EtcdKeySpace,
    start: bytes,
    end: bytes,
    *,
    after: int,
    fence: bytes | None = None,
) -> AsyncGenerator[WatchBatch, None]:
    """Every change in ``[start, end)`` after revision ``after``, across
    failures; events on ``fence`` become progress."""
    fence_key = b64(fence) if fence is not None else None
    delivered = after
    retry_deadline: float | None = None
    delay = 0.05
    loop = asyncio.get_running_loop()
    while not client.closed:
        endpoint = client.current_endpoint
        body = {
            "key": b64(start),
            "range_end": b64(end),
            "start_revision": str(delivered + 1),
            "prev_kv": True,
            "progress_notify": True,
        }
        try:
            async with contextlib.aclosing(client.watch_stream(body)) as stream:
                async for resp in stream:
                    if resp.get("canceled"):
                        compacted = int(resp.get("compact_revision", 0))
                        if compacted:
                            raise CompactedError(delivered + 1, compacted)
                        raise StorageUnavailableError(
                            f"etcd canceled the watch: {resp.get('cancel_reason', '')}"
                        )
                    if resp.get("created"):
                        retry_deadline, delay = None, 0.05
                        continue
                    raw_events = resp.get("events")
                    if raw_events:
                        revision = int(raw_events[-1]["kv"]["mod_revision"])
                        if revision > delivered:
                            events = tuple(
                                e
                                for e in (
                                    decode_event(keys, raw)
                                    for raw in raw_events
                                    if raw["kv"]["key"] != fence_key
                                )
                                if e.revision > delivered
                            )
                            delivered = revision
                            yield WatchBatch(revision, events)
                    else:
                        revision = int(resp.get("header", {}).get("revision", 0))
                        if revision >= delivered:
                            delivered = revision
                            yield WatchBatch(revision)
        except StorageUnavailableError as e:
            if client.closed:
                return
            now = loop.time()
            if retry_deadline is None:
                retry_deadline = now + client.retry_timeout
            elif now > retry_deadline:
                raise
            log.info("etcd watch broke, resuming", extra={"after": delivered, "reason": str(e)})
            client.rotate(endpoint)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)


async def first_change_after(
    client: EtcdHttpClient, keys: EtcdKeySpace, key: str, revision: int, *, timeout: float = 1.0
) -> WatchEvent | None:
    """The first event on ``key`` after ``revision``, or None if it cannot be
    known (history compacted, stream failure, nothing within ``timeout``)."""
    body = {"key": b64(keys.to_etcd(key)), "start_revision": str(revision + 1), "prev_kv": True}
    try:
        async with asyncio.timeout(timeout):
            async with contextlib.aclosing(client.watch_stream(body)) as stream:
                async for resp in stream:
                    if resp.get("canceled"):
                        return None
                    if resp.get("events"):
                        return decode_event(keys, resp["events"][0])
    except (TimeoutError, StorageUnavailableError):
        return None
    return None


async def find_compacted_revision(client: EtcdHttpClient, keys: EtcdKeySpace) -> int:
    """The compacted revision of a store known to be compacted past revision 1.

    etcd reports it only in a watch cancel: a watch from revision 1 is canceled
    at once with ``compact_revision``.
    """
    body = {"key": b64(keys.to_etcd("/registry")), "start_revision": "1"}
    async with asyncio.timeout(client.request_timeout):
        async with contextlib.aclosing(client.watch_stream(body)) as stream:
            async for resp in stream:
                if resp.get("canceled"):
                    return int(resp.get("compact_revision", 0))
    return 0  # not reached: watch_stream raises when its stream ends
