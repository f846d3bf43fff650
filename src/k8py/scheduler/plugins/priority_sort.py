"""PrioritySort (QueueSort): higher ``spec.priority`` first, then earlier arrival."""

from __future__ import annotations

from k8py.scheduler.framework.types import QueuedPodInfo
from k8py.scheduler.plugins.names import PRIORITY_SORT

__all__ = ["PrioritySort", "less"]


def less(a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
    pa, pb = a.info.priority, b.info.priority
    return pa > pb or (pa == pb and a.timestamp < b.timestamp)


class PrioritySort:
    name = PRIORITY_SORT

    def __init__(self, args: dict | None = None, handle: object = None) -> None:
        pass

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return less(a, b)

    @staticmethod
    def sort_key(qpi: QueuedPodInfo) -> tuple[int, float]:
        """A key ordered as :func:`less`: ``less(a, b)`` iff ``sort_key(a) < sort_key(b)``."""
        return (-qpi.info.priority, qpi.timestamp)
