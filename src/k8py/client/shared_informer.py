"""SharedIndexInformer: one reflector, one DeltaFIFO, one Indexer, many handlers.

Data flow (client-go's ``sharedIndexInformer``)::

    Reflector --add/update/delete/replace--> DeltaFIFO --pop--> process_deltas
        process_deltas: Indexer (the cache) then every ProcessorListener.offer
        ProcessorListener (one task per handler) --> on_add / on_update / on_delete

Guarantees:

- the cache is updated *before* handlers are told, so a handler (or the
  controller it queues work for) reading the lister sees at least that state;
- per object, each handler sees changes in resourceVersion order; a slow
  handler delays only itself (see :mod:`k8py.client.processor_listener` for
  its bounded buffer);
- a ``Replaced`` delta (a relist) whose resourceVersion equals the cached one
  is a no-op for handlers, like a ``Sync`` (client-go: only resyncing
  listeners see it); objects that vanished during a relist reach
  ``on_delete`` as :class:`~k8py.client.keys.DeletedFinalStateUnknown`;
- periodic resync (``resync_period`` per handler) re-delivers the cache as
  ``on_update(obj, obj)`` to the handlers that asked for it;
- ``transform`` runs on every object before it enters the FIFO and the cache
  (e.g. :func:`drop_managed_fields`); tombstones pass through it untouched;
- :meth:`has_synced` turns true once the first full list has been popped
  into the cache; :meth:`wait_for_cache_sync` waits for that.

Faults stay local: a handler that raises is logged and counted by its
listener (:attr:`ProcessorListener.handler_errors`); an object the cache
refuses (an index function raising) is logged, counted in
:attr:`SharedIndexInformer.process_errors`, and neither cached nor announced,
and the next delta is processed; bad objects from the server are the
reflector's (:attr:`Reflector.store_errors`). None of them ends ``run``.

A handler added while the informer runs first gets ``on_add`` for every
cached object, then the live changes.

Other keyword arguments of the constructor go to the
:class:`~k8py.client.reflector.Reflector` (``use_watch_list``, ``page_size``,
``full_relist_period``, ``backoff``, ...).

Lifecycle: ``await informer.run()`` until cancelled; its tasks are named
``<resource>-reflector``, ``<resource>-processor`` and one per listener.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

from k8py.client.clock import Clock, RealClock
from k8py.client.controller_loop import wait_for_cache_sync
from k8py.client.delta_fifo import Delta, DeltaFIFO, Deltas, DeltaType, FIFOClosedError
from k8py.client.indexer import Indexer, Indexers
from k8py.client.keys import DeletedFinalStateUnknown
from k8py.client.listers import Lister
from k8py.client.processor_listener import ADD, DELETE, UPDATE, FunctionHandler, HandlerResult, Notification, ProcessorListener, ResourceEventHandler
from k8py.client.reflector import Reflector
from k8py.client.resource import Resource
from k8py.client.rest import RestClient

__all__ = ["SharedIndexInformer", "drop_managed_fields", "TransformFunc"]

logger = logging.getLogger(__name__)

TransformFunc = Callable[[Any], Any]
_MIN_RESYNC_PERIOD = 1.0


def drop_managed_fields(obj: Any) -> Any:
    """A transform that removes ``metadata.managedFields`` (often half an object's size)."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


def _rv(obj: Any) -> str:
    return ((obj or {}).get("metadata") or {}).get("resourceVersion") or ""


class SharedIndexInformer:
    """See the module docstring."""

    def __init__(
        self,
        client: RestClient,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resync_period: float = 0.0,
        indexers: Indexers | None = None,
        transform: TransformFunc | None = None,
        clock: Clock | None = None,
        listener_buffer_size: int = 10_000,
        **reflector_options: Any,
    ) -> None:
        self.resource = resource
        self.default_resync_period = resync_period
        self.listener_buffer_size = listener_buffer_size
        self._clock: Clock = clock if clock is not None else RealClock()
        self._transform = transform
        self.indexer = Indexer(indexers=indexers)
        self.fifo = DeltaFIFO(known_objects=self.indexer, transformer=self._transform_object)
        self._resync_check_period = resync_period
        self.reflector = Reflector(
            client, resource, self.fifo, namespace=namespace, label_selector=label_selector, field_selector=field_selector,
            resync_period=resync_period, should_resync=self._should_resync, clock=self._clock,
            name=f"{resource.qualified}-reflector", **reflector_options,
        )
        self.lister = Lister(self.indexer, resource)
        self._listeners: list[ProcessorListener] = []
        self._syncing: list[ProcessorListener] = []
        self._group: asyncio.TaskGroup | None = None
        self._tasks: dict[ProcessorListener, asyncio.Task[None]] = {}
        self._started = False
        #: deltas that could not be applied to the cache (logged, then skipped)
        self.process_errors = 0

    # -- configuration -------------------------------------------------------------------

    def _transform_object(self, obj: Any) -> Any:
        if self._transform is None or isinstance(obj, DeletedFinalStateUnknown):
            return obj
        return self._transform(obj)

    def set_transform(self, transform: TransformFunc | None) -> None:
        if self._started:
            raise RuntimeError("the transform must be set before the informer starts")
        self._transform = transform

    def add_indexers(self, indexers: Indexers) -> None:
        self.indexer.add_indexers(indexers)

    def add_event_handler(
        self,
        on_add: Callable[[Any], HandlerResult] | None = None,
        on_update: Callable[[Any, Any], HandlerResult] | None = None,
        on_delete: Callable[[Any], HandlerResult] | None = None,
        *,
        handler: ResourceEventHandler | None = None,
        resync_period: float | None = None,
        buffer_size: int | None = None,
    ) -> ProcessorListener:
        """Register a handler (callables or a :class:`ResourceEventHandler`); returns its listener."""
        period = self.default_resync_period if resync_period is None else resync_period
        if 0 < period < _MIN_RESYNC_PERIOD:
            period = _MIN_RESYNC_PERIOD
        if period > 0 and (self._resync_check_period == 0 or period < self._resync_check_period):
            self._resync_check_period = period
            self.reflector.resync_period = period
        listener = ProcessorListener(
            handler if handler is not None else FunctionHandler(on_add, on_update, on_delete),
            buffer_size=buffer_size or self.listener_buffer_size,
            resync_period=period,
            name=f"{self.resource.qualified}-listener-{len(self._listeners)}",
        )
        listener.next_resync = self._clock.monotonic() + period
        self._listeners.append(listener)
        if self._started:
            for obj in self.indexer.list():
                listener.offer(Notification(ADD, None, obj))
            self._start_listener(listener)
        return listener

    def remove_event_handler(self, listener: ProcessorListener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)
        task = self._tasks.pop(listener, None)
        if task is not None:
            task.cancel()

    # -- state -----------------------------------------------------------------------------

    def has_synced(self) -> bool:
        return self.fifo.has_synced()

    async def wait_for_cache_sync(self, timeout: float | None = None) -> bool:
        return await wait_for_cache_sync(self.has_synced, clock=self._clock, period=0.01, timeout=timeout)

    @property
    def last_sync_resource_version(self) -> str:
        return self.reflector.last_sync_resource_version

    async def wait_idle(self) -> None:
        """Until the FIFO is empty and every listener has handled what it was given."""
        while len(self.fifo) or any(listener.pending for listener in self._listeners):
            for listener in self._listeners:
                await listener.wait_idle()
            await asyncio.sleep(0)

    # -- running ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Run the reflector, the processor and the listeners until cancelled."""
        if self._started:
            raise RuntimeError("an informer runs once")
        self._started = True
        name = self.resource.qualified
        try:
            async with asyncio.TaskGroup() as group:
                self._group = group
                for listener in self._listeners:
                    self._start_listener(listener)
                group.create_task(self.reflector.run(), name=f"{name}-reflector")
                group.create_task(self._process_loop(), name=f"{name}-processor")
        finally:
            self._group = None
            self.fifo.close()

    def _start_listener(self, listener: ProcessorListener) -> None:
        assert self._group is not None
        self._tasks[listener] = self._group.create_task(listener.run(), name=listener.name)

    async def _process_loop(self) -> None:
        while True:
            try:
                await self.fifo.pop(self._process_deltas)
            except FIFOClosedError:
                return
            except Exception:  # _process_deltas isolates each delta; this is a last guard
                self.process_errors += 1
                logger.exception("processing deltas failed", extra={"informer": self.resource.qualified})

    def _should_resync(self) -> bool:
        now = self._clock.monotonic()
        self._syncing = [ls for ls in self._listeners if ls.resync_period > 0 and now >= ls.next_resync]
        for listener in self._syncing:
            listener.next_resync = now + listener.resync_period
        return bool(self._syncing)

    def _process_deltas(self, deltas: Deltas, is_in_initial_list: bool) -> None:
        """Apply a key's deltas to the cache, then tell the listeners (synchronous: see DeltaFIFO)."""
        del is_in_initial_list
        for delta in deltas:
            try:
                self._process_delta(delta)
            except Exception as err:
                self.process_errors += 1
                logger.error("delta refused by the cache; skipped", extra={"informer": self.resource.qualified, "type": delta.type.value, "error": repr(err)})

    def _process_delta(self, delta: Delta) -> None:
        delta_type, obj = delta
        if delta_type is DeltaType.DELETED:
            old = self.indexer.get(obj)
            self.indexer.delete(obj)
            if old is None and isinstance(obj, DeletedFinalStateUnknown) and obj.obj is None:
                return
            self._distribute(Notification(DELETE, None, obj), sync=False)
            return
        old = self.indexer.swap(obj)
        if old is None:
            note = Notification(ADD, None, obj)
        elif delta_type is DeltaType.SYNC or (delta_type is DeltaType.REPLACED and _rv(old) == _rv(obj)):
            self._distribute(Notification(UPDATE, old, obj), sync=True)
            return
        else:
            note = Notification(UPDATE, old, obj)
        for listener in self._listeners:  # _distribute(note, sync=False), inlined: once per object change
            listener.offer(note)

    def _distribute(self, note: Notification, *, sync: bool) -> None:
        for listener in self._syncing if sync else self._listeners:
            listener.offer(note)
