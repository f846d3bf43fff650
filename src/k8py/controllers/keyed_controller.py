"""KeyedController: the informer -> rate-limited queue -> ``sync(key)`` loop.

Most controllers are this shape (client-go's sample-controller): event
handlers on shared informers turn changes into keys, a rate-limited queue
de-duplicates them, and N workers (``--concurrent-<name>-syncs``) run
``sync(key)``, which reads the latest state from listers, acts, and returns
``None``, a number of seconds after which to look again, or raises for the
loop to retry with backoff (:class:`~k8py.client.controller_loop.ControllerLoop`
owns the retry policy). A subclass:

- calls ``super().__init__(ctx, name=..., queue_name=...)``;
- gets its informers from ``ctx.informers`` and lists each one it reads with
  :meth:`wait_for` so :meth:`run` waits for their caches before any worker;
- implements ``async def sync(self, key)``.

Guarantees: a key is processed by one worker at a time (the queue's rule);
``run`` returns only by cancellation, and shuts the queue down on the way out.
"""

from __future__ import annotations

import logging
from typing import Any

from k8py.client.controller_loop import DEFAULT_MAX_RETRIES, ControllerLoop
from k8py.client.keys import DeletedFinalStateUnknown, KeyFuncError, object_key
from k8py.client.shared_informer import SharedIndexInformer
from k8py.controllers.context import ControllerContext

__all__ = ["KeyedController"]

logger = logging.getLogger(__name__)


class KeyedController:
    """Base for queue-driven controllers; see the module docstring."""

    def __init__(
        self,
        ctx: ControllerContext,
        *,
        name: str,
        queue_name: str | None = None,
        workers: int | None = None,
        max_retries: int | None = DEFAULT_MAX_RETRIES,
    ) -> None:
        self.ctx = ctx
        self.name = name
        self.client = ctx.client
        self.clock = ctx.clock
        self.queue = ctx.new_queue(queue_name or name)
        self._synced: list[SharedIndexInformer] = []
        self.loop: ControllerLoop[Any] = ControllerLoop(
            name=name, queue=self.queue, sync=self.sync,
            workers=workers if workers is not None else ctx.options.concurrent_syncs(name),
            max_retries=max_retries, clock=ctx.clock,
        )

    def wait_for(self, *informers: SharedIndexInformer) -> None:
        """Caches that must be synced before the workers start."""
        self._synced.extend(informers)

    def enqueue(self, obj: Any) -> None:
        """Queue ``obj``'s key (an object, a tombstone or a key)."""
        try:
            self.queue.add(object_key(obj))
        except KeyFuncError:
            logger.warning("cannot queue an object without a key", extra={"controller": self.name})

    def enqueue_after(self, obj: Any, delay: float) -> None:
        try:
            self.queue.add_after(object_key(obj), delay)
        except KeyFuncError:
            logger.warning("cannot queue an object without a key", extra={"controller": self.name})

    async def sync(self, key: str) -> float | None:
        raise NotImplementedError

    async def run(self) -> None:
        for informer in self._synced:
            await informer.wait_for_cache_sync()
        logger.info("caches synced; starting workers", extra={"controller": self.name})
        await self.loop.run()


def unwrap_tombstone(obj: Any) -> Any | None:
    """The last known object behind a tombstone (``None`` if unknown), or ``obj`` itself."""
    if isinstance(obj, DeletedFinalStateUnknown):
        return obj.obj
    return obj
