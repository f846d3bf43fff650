"""The scheduler's cache of nodes and placed (or assumed) pods: see :mod:`.cache`."""

from k8py.scheduler.cache.cache import SchedulerCache

__all__ = ["SchedulerCache"]
