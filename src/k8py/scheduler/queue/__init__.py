"""The scheduling queue (active, backoff, unschedulable, gated): see :mod:`.scheduling_queue`."""

from k8py.scheduler.queue.scheduling_queue import ACTIVE, BACKOFF, GATED, UNSCHEDULABLE, SchedulingQueue

__all__ = ["SchedulingQueue", "ACTIVE", "BACKOFF", "UNSCHEDULABLE", "GATED"]
