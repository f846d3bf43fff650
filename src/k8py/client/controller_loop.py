"""The standard controller worker loop: N workers, one key at a time.

Every client-go controller repeats the same loop; this module is that loop,
so controllers only write ``sync(key)``::

    key = await queue.get()
    try:
        await sync(key)          # read the latest object from the lister
    except Exception:            # failure: back off and retry, or give up
        ...
    else:
        queue.forget(key)        # success: reset the key's backoff
    finally:
        queue.done(key)

Retry policy belongs to the loop, not to ``sync``:

- ``sync`` returns normally: the key is forgotten (its backoff resets);
- ``sync`` returns a number of seconds: the key is forgotten and queued again
  after that delay (a deliberate re-check, such as a deadline; not a failure);
- ``sync`` raises: if the key has been requeued fewer than ``max_retries``
  times it is requeued with rate limiting; otherwise it is forgotten and
  ``on_give_up(key, error)`` is called (the default logs). Giving up only
  stops the retries: the next change to the object queues the key again.
  ``max_retries=None`` retries forever.

``CancelledError`` from ``sync`` is never treated as a failure: it propagates.

Lifecycle: :meth:`ControllerLoop.run` runs ``workers`` named tasks until the
queue is shut down (``await queue.shut_down_with_drain()`` lets in-flight keys
finish; workers exit once the queue is empty) or until ``run`` is cancelled,
which cancels the workers and shuts the queue down. It also samples the
queue's unfinished-work metrics every 500 ms of the clock. Use
:func:`wait_for_cache_sync` before starting workers, so that ``sync`` never
reads a cache that is still filling.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Awaitable, Callable, Generic, Hashable

from k8py.client.clock import Clock, RealClock
from k8py.client.rate_limiting_queue import RateLimitingQueue
from k8py.client.work_queue import QueueShutDown, T

__all__ = ["SyncFunc", "GiveUpFunc", "ControllerLoop", "wait_for_cache_sync", "DEFAULT_MAX_RETRIES"]

logger = logging.getLogger(__name__)

DEFAULT_MAX_RETRIES = 15
"""What most kube-controller-manager controllers use (deployment, endpoints, ...)."""

SyncFunc = Callable[[T], Awaitable[float | None]]
"""``async sync(key)``: reconcile one key; ``None`` or seconds-until-recheck."""

GiveUpFunc = Callable[[T, Exception], Awaitable[None] | None]
"""Called after the last failed retry of a key (may be a coroutine function)."""

_UNFINISHED_WORK_UPDATE_PERIOD = 0.5


def _log_give_up(key: Hashable, error: Exception) -> None:
    logger.warning("dropping key out of the queue after retries", extra={"key": key, "error": repr(error)})


class ControllerLoop(Generic[T]):
    """Runs ``sync`` for the keys of ``queue``; see the module docstring."""

    def __init__(
        self,
        *,
        name: str,
        queue: RateLimitingQueue[T],
        sync: SyncFunc[T],
        workers: int = 1,
        max_retries: int | None = DEFAULT_MAX_RETRIES,
        on_give_up: GiveUpFunc[T] | None = None,
        clock: Clock | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self.name = name
        self.queue = queue
        self._sync = sync
        self._workers = workers
        self._max_retries = max_retries
        self._on_give_up: GiveUpFunc[T] = on_give_up if on_give_up is not None else _log_give_up
        self._clock: Clock = clock if clock is not None else RealClock()

    async def run(self) -> None:
        """Run the workers until the queue shuts down or this task is cancelled."""
        try:
            async with asyncio.TaskGroup() as group:
                sampler = None
                if self.queue.records_metrics:
                    sampler = group.create_task(self._sample_metrics(), name=f"{self.name}-queue-metrics")
                workers = [
                    group.create_task(self._worker(), name=f"{self.name}-worker-{i}") for i in range(self._workers)
                ]
                await asyncio.gather(*workers)
                if sampler is not None:
                    sampler.cancel()
        finally:
            self.queue.shut_down()

    async def process_next_item(self) -> bool:
        """Take one key and handle it; ``False`` once the queue has shut down."""
        try:
            key = await self.queue.get()
        except QueueShutDown:
            return False
        try:
            try:
                requeue_after = await self._sync(key)
            except Exception as error:  # noqa: BLE001 - the loop owns retry policy
                await self._handle_error(key, error)
            else:
                self.queue.forget(key)
                if requeue_after is not None and requeue_after > 0:
                    self.queue.add_after(key, requeue_after)
        finally:
            self.queue.done(key)
        return True

    async def _worker(self) -> None:
        while await self.process_next_item():
            pass

    async def _handle_error(self, key: T, error: Exception) -> None:
        if self._max_retries is None or self.queue.num_requeues(key) < self._max_retries:
            logger.debug(
                "error syncing key, requeueing",
                extra={"controller": self.name, "key": key, "error": repr(error)},
            )
            self.queue.add_rate_limited(key)
            return
        self.queue.forget(key)
        try:
            result = self._on_give_up(key, error)
            if inspect.isawaitable(result):
                await result
        except Exception:  # a broken hook must not kill the worker
            logger.exception("on_give_up hook failed", extra={"controller": self.name, "key": key})

    async def _sample_metrics(self) -> None:
        while True:
            self.queue.update_unfinished_work_metrics()
            await self._clock.sleep(_UNFINISHED_WORK_UPDATE_PERIOD)


async def wait_for_cache_sync(
    *has_synced: Callable[[], bool],
    clock: Clock | None = None,
    period: float = 0.1,
    timeout: float | None = None,
) -> bool:
    """Poll ``has_synced`` callables every ``period`` until all are true.

    Returns ``True`` once synced, ``False`` if ``timeout`` (clock seconds)
    passes first. Cancel the caller to stop waiting.
    """
    clock = clock if clock is not None else RealClock()
    deadline = None if timeout is None else clock.monotonic() + timeout
    while not all(check() for check in has_synced):
        if deadline is not None and clock.monotonic() >= deadline:
            return False
        await clock.sleep(period)
    return True
