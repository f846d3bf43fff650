"""One event handler of a shared informer, with its own bounded buffer and task.

The informer's distribution loop hands each notification to every listener
with :meth:`ProcessorListener.offer`, which never waits; each listener's own
task (:meth:`ProcessorListener.run`) calls the handler. So a slow handler
delays only itself: not the other handlers, not the informer's cache, not the
reflector.

**Buffer bound, and what happens when it is full.** client-go gives each
listener an unbounded ring buffer: a stuck handler grows memory without
limit. Blocking the distribution loop instead would let one slow handler
stall all the others. k8py does neither and never drops a change silently:

- notifications go to a FIFO of at most ``buffer_size`` entries;
- when it is full the listener becomes *lagging*: from then on, new
  notifications are **coalesced per object key** into an ordered map holding
  one pending entry per key (the state the handler last saw before the lag,
  and the newest one), which is bounded by the number of objects in the
  cache, like a work queue;
- the handler drains the FIFO first, then the map; once the map is empty the
  listener stops lagging. While lagging nothing enters the FIFO, so for each
  key the handler still sees changes in order: coalescing only skips
  intermediate states (an add followed by updates is one add of the newest
  state; updates collapse into one ``on_update(first_old, newest)``; an add
  then a delete of an object the handler never saw vanishes; a delete keeps
  the last state), which is what a relist does anyway. Every coalesced
  notification is counted in :attr:`ProcessorListener.coalesced`.

Handlers may be plain functions or coroutine functions. An exception from a
handler is logged, counted in :attr:`ProcessorListener.handler_errors`, and
the listener carries on with the next notification (client-go logs it with
``HandleError`` the same way); ``CancelledError`` is never swallowed.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections import deque
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Protocol

from k8py.client.keys import DeletedFinalStateUnknown, object_key

__all__ = ["ResourceEventHandler", "Notification", "ProcessorListener", "ADD", "UPDATE", "DELETE"]

logger = logging.getLogger(__name__)

ADD, UPDATE, DELETE = "add", "update", "delete"
_YIELD_EVERY = 32  # notifications handled in a row by a synchronous handler before yielding to the loop

HandlerResult = Awaitable[None] | None


class ResourceEventHandler(Protocol):
    """What a listener calls; each callback may be sync or async."""

    def on_add(self, obj: Any) -> HandlerResult: ...

    def on_update(self, old: Any, new: Any) -> HandlerResult: ...

    def on_delete(self, obj: Any) -> HandlerResult: ...


@dataclass(slots=True)
class Notification:
    kind: str  # ADD, UPDATE, DELETE
    old: Any  # UPDATE: the previous state; otherwise None
    new: Any  # ADD/UPDATE: the new state; DELETE: the last state or a tombstone


@dataclass(slots=True)
class _Pending:
    before: Any  # the state the handler saw last before the lag (None: it knows no object)
    latest: Notification


class FunctionHandler:
    """A :class:`ResourceEventHandler` from up to three callables."""

    def __init__(
        self,
        on_add: Callable[[Any], HandlerResult] | None = None,
        on_update: Callable[[Any, Any], HandlerResult] | None = None,
        on_delete: Callable[[Any], HandlerResult] | None = None,
    ) -> None:
        self._add, self._update, self._delete = on_add, on_update, on_delete

    def on_add(self, obj: Any) -> HandlerResult:
        return self._add(obj) if self._add else None

    def on_update(self, old: Any, new: Any) -> HandlerResult:
        return self._update(old, new) if self._update else None

    def on_delete(self, obj: Any) -> HandlerResult:
        return self._delete(obj) if self._delete else None


class ProcessorListener:
    """See the module docstring."""

    def __init__(self, handler: ResourceEventHandler, *, buffer_size: int = 10_000, resync_period: float = 0.0, name: str = "listener") -> None:
        if buffer_size < 1:
            raise ValueError("buffer_size must be >= 1")
        self.handler = handler
        self.buffer_size = buffer_size
        self.resync_period = resync_period
        self.name = name
        self.next_resync: float = 0.0
        self._buffer: deque[Notification] = deque()
        self._lagging: dict[str, _Pending] = {}
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        #: notifications merged into an earlier pending one while lagging
        self.coalesced = 0
        #: notifications handed to the handler
        self.delivered = 0
        #: handler calls that raised (logged, then the next notification is delivered)
        self.handler_errors = 0

    @property
    def pending(self) -> int:
        return len(self._buffer) + len(self._lagging)

    @property
    def is_lagging(self) -> bool:
        return bool(self._lagging)

    def offer(self, note: Notification) -> None:
        """Queue a notification; never waits (see the module docstring)."""
        self._idle.clear()
        if not self._lagging and len(self._buffer) < self.buffer_size:
            self._buffer.append(note)
        else:
            self._coalesce(note)
        self._wake.set()

    def _coalesce(self, note: Notification) -> None:
        key = object_key(note.new)
        pending = self._lagging.get(key)
        if pending is None:
            before = note.old if note.kind == UPDATE else (note.new if note.kind == DELETE else None)
            if note.kind == DELETE and isinstance(before, DeletedFinalStateUnknown):
                before = before.obj
            self._lagging[key] = _Pending(before, note)
            return
        self.coalesced += 1
        pending.latest = note

    def _next(self) -> Notification | None:
        if self._buffer:
            return self._buffer.popleft()
        while self._lagging:
            key = next(iter(self._lagging))
            pending = self._lagging.pop(key)
            latest = pending.latest
            if latest.kind == DELETE:
                if pending.before is None:
                    continue  # added and deleted while lagging: the handler never knew it
                return latest
            if pending.before is None:
                return Notification(ADD, None, latest.new)
            return Notification(UPDATE, pending.before, latest.new)
        return None

    async def wait_idle(self) -> None:
        """Until everything offered so far has been handled."""
        await self._idle.wait()

    async def run(self) -> None:
        """Deliver notifications until cancelled."""
        handler = self.handler
        while True:
            note = self._buffer.popleft() if self._buffer else self._next()
            if note is None:
                self._idle.set()
                self._wake.clear()
                await self._wake.wait()
                continue
            try:
                kind = note.kind
                if kind == UPDATE:
                    result = handler.on_update(note.old, note.new)
                elif kind == ADD:
                    result = handler.on_add(note.new)
                else:
                    result = handler.on_delete(note.new)
                if result is not None and inspect.isawaitable(result):
                    await result
            except asyncio.CancelledError:
                raise
            except Exception:
                self.handler_errors += 1
                logger.exception("event handler failed", extra={"listener": self.name, "kind": note.kind})
            self.delivered += 1
            if self.delivered % _YIELD_EVERY == 0:
                await asyncio.sleep(0)  # let the distribution loop and other listeners run
