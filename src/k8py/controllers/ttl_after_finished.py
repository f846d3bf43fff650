"""The TTL-after-finished controller (``ttl-after-finished``): delete finished Jobs.

Upstream: ``pkg/controller/ttlafterfinished``. A Job with
``spec.ttlSecondsAfterFinished`` is deleted that many seconds after it
finished (the ``lastTransitionTime`` of its ``Complete`` or ``Failed``
condition), with foreground propagation so its pods go first. Before
deleting, the controller reads the Job from the API server, not the cache,
and checks again: the TTL may have been changed or lifted meanwhile. The
delete carries the uid as a precondition, so a new Job of the same name is
never hit. Until the time has come, ``sync`` returns the seconds left and the
queue brings the key back then, on the controller's clock.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from k8py.api.errors import NotFound, StatusError
from k8py.client.keys import split_key
from k8py.client.resources import JOBS
from k8py.controllers.context import ControllerContext
from k8py.controllers.keyed_controller import KeyedController
from k8py.controllers.pod_status import parse_time

__all__ = ["TTLAfterFinishedController", "new_controller", "expire_at"]

logger = logging.getLogger(__name__)


def expire_at(job: dict[str, Any]) -> datetime | None:
    """When the Job's TTL runs out; None if it has no TTL or has not finished."""
    ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
    if ttl is None or (job.get("metadata") or {}).get("deletionTimestamp"):
        return None
    for cond in (job.get("status") or {}).get("conditions") or ():
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            finished = parse_time(cond.get("lastTransitionTime"))
            if finished is None:
                return None
            return finished + timedelta(seconds=int(ttl))
    return None


class TTLAfterFinishedController(KeyedController):
    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, name="ttl-after-finished", queue_name="ttl_jobs_to_delete")
        self.jobs = ctx.informers.informer(JOBS)
        self.lister = ctx.informers.lister(JOBS)
        self.wait_for(self.jobs)
        self.jobs.add_event_handler(on_add=self._changed, on_update=lambda old, new: self._changed(new))

    def _changed(self, job: dict[str, Any]) -> None:
        if expire_at(job) is not None:
            self.enqueue(job)

    async def sync(self, key: str) -> float | None:
        namespace, name = split_key(key)
        cached = self.lister.try_get(namespace, name)
        if cached is None or expire_at(cached) is None:
            return None
        left = self._left(cached)
        if left > 0:
            return left
        try:
            fresh = await self.client.get(JOBS, namespace, name)
        except NotFound:
            return None
        if expire_at(fresh) is None:
            return None
        left = self._left(fresh)
        if left > 0:
            return left
        logger.info("deleting finished job past its TTL", extra={"job": key})
        try:
            await self.client.delete(JOBS, namespace, name, propagation_policy="Foreground",
                                     preconditions={"uid": fresh["metadata"]["uid"],
                                                    "resourceVersion": fresh["metadata"]["resourceVersion"]})
        except NotFound:
            return None
        except StatusError as err:
            if err.reason == "Conflict":
                self.queue.add(key)
                return None
            raise
        return None

    def _left(self, job: dict[str, Any]) -> float:
        when = expire_at(job)
        assert when is not None
        return (when - self.clock.now()).total_seconds()


def new_controller(ctx: ControllerContext) -> TTLAfterFinishedController:
    return TTLAfterFinishedController(ctx)
