"""Reflector: keeps a store in step with the server by list and watch (client-go's).

One :class:`Reflector` mirrors one resource (optionally one namespace and
selector) into a :class:`~k8py.client.delta_fifo.ReflectorStore` (a DeltaFIFO
for an informer, or an Indexer directly). Its cycle:

1. **sync** the full state: either a *streaming list* (a watch with
   ``sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true``,
   collecting ADDED events until the BOOKMARK annotated
   ``k8s.io/initial-events-end``), or a paginated LIST (``limit=page_size``).
   Either way the store gets one ``replace(items, rv)``, so objects deleted
   while we were away become tombstones in the DeltaFIFO;
2. **watch** from the sync's resourceVersion with ``allowWatchBookmarks=true``
   and a ``timeoutSeconds`` drawn from 5–10 minutes (spreading reconnects of
   many clients), applying ADDED/MODIFIED/DELETED to the store;
3. when a watch **ends or breaks**, watch again from the last resourceVersion
   seen (of an object or of a bookmark): no list, no duplicate events;
4. on **410 Expired** (the ERROR event or an HTTP 410) the history we need is
   gone: go back to 1 (a *relist*, counted in :attr:`Reflector.relist_count`).

ResourceVersion semantics (client-go ``relistResourceVersion``): the first
list asks for ``resourceVersion=0`` (any cached state, cheap for the server);
later lists ask for "not older than the last one we saw"; if the server says
that version is too old or too new, the next list is a consistent read
(``resourceVersion`` unset).

Streaming lists are used when ``use_watch_list`` is true, or when it is
``None`` (try) and the server has not refused them: a 4xx answer (other than
410/429) to the streaming request, or a stream that ends before the
initial-events-end bookmark (a server that ignores the parameters), turns
them off for this reflector.

Errors are retried forever with exponential backoff and jitter on the
injected clock (800 ms → 30 s, reset after 2 quiet minutes). A broken
connection or 429/5xx during watch resumes the watch after a backoff; other
errors go back to step 1 after a backoff.

``full_relist_period``: a periodic *compensating* list, for a paranoid
consumer: the watch is ended and the store replaced with a fresh list, which
repairs any divergence. Off by default, as in client-go.

``resync_period`` with ``should_resync``: every period, ask the owner whether
a resync is due and call ``store.resync()`` (client-go's reflector does this
for the informer).

A bad object never stops a reflector (client-go's ``HandleError`` and carry
on): a watch event the store refuses (no key; a user transform or index
function raising) is logged, counted in :attr:`Reflector.store_errors`, and
the watch goes on past it; a list the store takes only in part
(:class:`~k8py.client.keys.ObjectsRejected`) counts each refused object and
still syncs; any other unexpected error in a cycle is logged, counted in
:attr:`Reflector.unexpected_errors`, and the cycle starts again after a
backoff. Only cancellation ends :meth:`Reflector.run`.

Concurrency: a reflector is one task (``run``); the store is only called
from it, synchronously. It takes a watch's events a read at a time
(:meth:`~k8py.client.watch_stream.WatchStream.batches`) and applies them in
order, moving its resourceVersion to the last one's: the same store calls as
one event at a time, for less of the per-event overhead every watch pays.
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Any, Callable

from k8py.api.errors import Expired, StatusError
from k8py.client.backoff import Backoff
from k8py.client.clock import Clock, RealClock
from k8py.client.delta_fifo import ReflectorStore
from k8py.client.keys import ObjectsRejected
from k8py.client.resource import Resource
from k8py.client.rest import RestClient
from k8py.client.transport import TransportError
from k8py.client.watch_stream import ADDED, BOOKMARK, DELETED, MODIFIED, WatchEvent

__all__ = ["Reflector"]

logger = logging.getLogger(__name__)

_MIN_WATCH_TIMEOUT = 300.0
#: a watch silent for longer than its own timeoutSeconds plus this is a dead connection
_DEAD_STREAM_MARGIN = 30.0


class _Relist(Exception):
    """Internal: leave the watch loop and list again."""


def _is_too_large_rv(err: StatusError) -> bool:
    return any(c.reason == "ResourceVersionTooLarge" for c in err.causes) or "Too large resource version" in err.message


class Reflector:
    """See the module docstring."""

    def __init__(
        self,
        client: RestClient,
        resource: Resource,
        store: ReflectorStore,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
        use_watch_list: bool | None = None,
        min_watch_timeout: float = _MIN_WATCH_TIMEOUT,
        full_relist_period: float | None = None,
        resync_period: float = 0.0,
        should_resync: Callable[[], bool] | None = None,
        backoff: Backoff | None = None,
        clock: Clock | None = None,
        rng: Callable[[], float] = random.random,
        name: str | None = None,
    ) -> None:
        self.client = client
        self.resource = resource
        self.store = store
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.page_size = page_size
        self.use_watch_list = use_watch_list
        self.min_watch_timeout = min_watch_timeout
        self.full_relist_period = full_relist_period
        self.resync_period = resync_period
        self._should_resync = should_resync
        self._clock: Clock = clock if clock is not None else RealClock()
        self._rng = rng
        self._backoff = backoff if backoff is not None else Backoff(clock=self._clock, rng=rng)
        self.name = name or f"reflector-{resource.qualified}"
        self._last_sync_rv = ""
        self._last_sync_rv_unavailable = False
        self._next_full_relist: float | None = None
        #: lists (or streaming lists) done after the first one
        self.relist_count = 0
        #: 410 Expired answers seen (each leads to a relist)
        self.expired_count = 0
        #: watch requests opened
        self.watch_count = 0
        #: objects the store refused (logged and skipped; see the module docstring)
        self.store_errors = 0
        #: list/watch cycles that failed with an unexpected exception (retried after a backoff)
        self.unexpected_errors = 0

    @property
    def last_sync_resource_version(self) -> str:
        """The resourceVersion the store reflects: the last list, object or bookmark seen."""
        return self._last_sync_rv

    # -- the loop ----------------------------------------------------------------------

    async def run(self) -> None:
        """List and watch until cancelled; never returns otherwise."""
        async with asyncio.TaskGroup() as group:
            if self.resync_period > 0:
                group.create_task(self._resync_loop(), name=f"{self.name}-resync")
            synced_once = False
            while True:
                try:
                    if synced_once:
                        self.relist_count += 1
                    await self._sync()
                    synced_once = True
                    await self._watch_loop()
                except _Relist:
                    continue
                except StatusError as err:
                    if isinstance(err, Expired):
                        self.expired_count += 1
                        continue
                    logger.warning("list/watch failed", extra={"reflector": self.name, "code": err.code, "error": err.message})
                except TransportError as err:
                    logger.info("list/watch connection failed", extra={"reflector": self.name, "error": str(err)})
                except Exception:
                    self.unexpected_errors += 1
                    logger.exception("list/watch failed unexpectedly; retrying after a backoff", extra={"reflector": self.name})
                await self._backoff.wait()

    async def _resync_loop(self) -> None:
        while True:
            await self._clock.sleep(self.resync_period)
            if self._should_resync is None or self._should_resync():
                self.store.resync()

    # -- step 1: sync ------------------------------------------------------------------

    def _relist_rv(self) -> str:
        if self._last_sync_rv_unavailable:
            return ""
        return self._last_sync_rv or "0"

    async def _sync(self) -> None:
        if self.full_relist_period:
            self._next_full_relist = self._clock.monotonic() + self.full_relist_period
        if self.use_watch_list is not False:
            if await self._watch_list():
                return  # the streaming list turned into the live watch and has ended
        await self._list()

    async def _list(self) -> None:
        rv = self._relist_rv()
        try:
            page = await self._list_at(rv)
        except StatusError as err:
            if rv in ("", "0") or not (isinstance(err, Expired) or _is_too_large_rv(err)):
                raise
            self._last_sync_rv_unavailable = True
            page = await self._list_at("")
        items = [self._with_type(o) for o in page.get("items") or ()]
        list_rv = (page.get("metadata") or {}).get("resourceVersion") or ""
        self._replace(items, list_rv)
        self._set_rv(list_rv)
        self._last_sync_rv_unavailable = False

    async def _list_at(self, rv: str) -> dict[str, Any]:
        return await self.client.list_all(
            self.resource, self.namespace, limit=self.page_size, label_selector=self.label_selector,
            field_selector=self.field_selector, resource_version=rv,
        )

    async def _watch_list(self) -> bool:
        """Sync by a streaming list, then keep watching on the same stream.

        Returns ``False`` (and turns streaming off) if the server does not
        support it; ``True`` once the stream, after syncing, has ended.
        """
        rv = "" if self._last_sync_rv_unavailable else self._last_sync_rv
        timeout = self._watch_timeout()
        stream = self.client.watch(
            self.resource, self.namespace, resource_version=rv, label_selector=self.label_selector,
            field_selector=self.field_selector, send_initial_events=True, timeout_seconds=timeout,
            read_timeout=timeout + _DEAD_STREAM_MARGIN,
        )
        self.watch_count += 1
        initial: dict[str, Any] = {}
        synced = False
        got_event = False
        try:
            async for events in stream.batches():
                got_event = True
                if synced:
                    self._apply_all(events)
                    continue
                for position, event in enumerate(events):
                    if event.is_initial_events_end:
                        self._replace(list(initial.values()), event.resource_version)
                        # let the raw objects go now: the live watch after the list can last ten minutes, and this
                        # frame with it (5,000 Nodes untransformed, kept beside their summaries, in the simulated kubelet)
                        initial = {}
                        self._set_rv(event.resource_version)
                        self._last_sync_rv_unavailable = False
                        synced = True
                        self._apply_all(events[position + 1:])
                        break
                    if event.type in (ADDED, MODIFIED):
                        obj = self._with_type(event.object)
                        initial[_key(obj)] = obj
                    elif event.type == DELETED:
                        initial.pop(_key(event.object), None)
        except TransportError:
            if synced:
                return True  # synced; the live part broke: resume watching from the last RV
            raise
        except StatusError as err:
            if not got_event and 400 <= err.code < 500 and err.code not in (410, 429) and self.use_watch_list is None:
                logger.info("streaming lists refused; falling back to list+watch", extra={"reflector": self.name, "code": err.code})
                self.use_watch_list = False
                return False
            raise
        finally:
            await stream.aclose()
        if not synced:
            if self.use_watch_list is None:
                logger.info("no initial-events-end bookmark; falling back to list+watch", extra={"reflector": self.name})
                self.use_watch_list = False
                return False
            raise TransportError("streaming list ended before the initial-events-end bookmark", request_sent=True)
        return True

    # -- step 2/3: watch ---------------------------------------------------------------

    def _watch_timeout(self) -> int:
        timeout = self.min_watch_timeout * (1.0 + self._rng())
        if self._next_full_relist is not None:
            timeout = min(timeout, max(1.0, self._next_full_relist - self._clock.monotonic()))
        return max(1, int(timeout))

    async def _watch_loop(self) -> None:
        while True:
            if self._next_full_relist is not None and self._clock.monotonic() >= self._next_full_relist:
                raise _Relist()
            timeout = self._watch_timeout()
            stream = self.client.watch(
                self.resource, self.namespace, resource_version=self._last_sync_rv, label_selector=self.label_selector,
                field_selector=self.field_selector, allow_bookmarks=True, timeout_seconds=timeout,
                read_timeout=timeout + _DEAD_STREAM_MARGIN,
            )
            self.watch_count += 1
            try:
                async for events in stream.batches():
                    self._apply_all(events)
            except TransportError as err:
                logger.debug("watch broke; resuming", extra={"reflector": self.name, "rv": self._last_sync_rv, "error": str(err)})
                await self._backoff.wait()
            except StatusError as err:
                if isinstance(err, Expired):
                    raise
                if err.code == 429 or err.code >= 500:
                    await self._backoff.wait()
                    continue
                raise
            finally:
                await stream.aclose()

    def _replace(self, items: list[dict[str, Any]], rv: str) -> None:
        try:
            self.store.replace(items, rv)
        except ObjectsRejected as rejected:
            self.store_errors += len(rejected.errors)
            for obj, err in rejected.errors:
                logger.error("list item refused by the store; skipped", extra={"reflector": self.name, "key": _key(obj) if isinstance(obj, dict) else None, "error": repr(err)})

    def _apply_all(self, events: list[WatchEvent]) -> None:
        """Apply one read's events in order; the resourceVersion moves to the last one's."""
        if not events:
            return
        store = self.store
        actions = {ADDED: store.add, MODIFIED: store.update, DELETED: store.delete}
        kind, api_version = self.resource.kind, self.resource.api_version
        rv = ""
        for event_type, obj in events:
            action = actions.get(event_type)
            if action is not None:
                # _with_type, inlined: this loop runs for every object change watched
                if "kind" not in obj and kind:
                    obj["kind"] = kind
                if "apiVersion" not in obj:
                    obj["apiVersion"] = api_version
                try:
                    action(obj)
                except Exception as err:
                    # client-go: "unable to add watch event object to store"; the watch goes on
                    self.store_errors += 1
                    logger.error("watch event refused by the store; skipped",
                                 extra={"reflector": self.name, "type": event_type, "error": repr(err)})
            elif event_type != BOOKMARK:
                logger.warning("unexpected watch event type", extra={"reflector": self.name, "type": event_type})
                continue
            meta = obj.get("metadata")
            rv = (meta.get("resourceVersion") if type(meta) is dict else None) or rv
        self._set_rv(rv)

    def _set_rv(self, rv: str) -> None:
        if rv:
            self._last_sync_rv = rv
            self._backoff.reset()

    def _with_type(self, obj: dict[str, Any]) -> dict[str, Any]:
        """List items come without kind/apiVersion; watch objects with. Make them alike."""
        if "kind" not in obj and self.resource.kind:
            obj["kind"] = self.resource.kind
        if "apiVersion" not in obj:
            obj["apiVersion"] = self.resource.api_version
        return obj


def _key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns, name = meta.get("namespace"), meta.get("name", "")
    return f"{ns}/{name}" if ns else name
