"""The backoff queue: pods that failed, each waiting out its backoff (upstream ``backoffQueue``).

A pod is pushed with the moment its backoff ends and leaves by one of three doors:

- :meth:`BackoffQueue.pop_expired`: its backoff is over (the scheduling queue moves it to
  active);
- :meth:`BackoffQueue.pop_earliest`: the active queue is empty, so the pod whose backoff ends
  first is tried now (KEP-5142, see :mod:`.scheduling_queue`) — only a pod backing off for
  having been unschedulable: after an error the backoff is the retry rate limit and is kept;
- :meth:`BackoffQueue.discard`: the pod was deleted, or moved elsewhere.

Both heaps are lazy: an entry whose pod is gone, or was pushed again since (its expiry differs),
is skipped when it reaches the top. Ties pop in the order pushed.
"""

from __future__ import annotations

import heapq
import itertools

from k8py.scheduler.framework.types import QueuedPodInfo

__all__ = ["BackoffQueue"]


class BackoffQueue:
    def __init__(self, *, pop_early: bool = True) -> None:
        #: key -> the pod, while it backs off
        self.pods: dict[str, QueuedPodInfo] = {}
        #: whether :meth:`pop_earliest` may take a pod before its backoff ends
        self.pop_early = pop_early
        self._expiries: list[tuple[float, int, str]] = []  # every pod, by expiry
        self._early: list[tuple[float, int, str]] = []  # the ones pop_earliest may take
        self._after_error: set[str] = set()
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self.pods)

    def __contains__(self, key: str) -> bool:
        return key in self.pods

    def push(self, qpi: QueuedPodInfo, expiry: float, *, error: bool = False) -> bool:
        """Back ``qpi`` off until ``expiry`` (``error``: it failed with an error, not as
        unschedulable). True if its backoff now ends first of all."""
        qpi.backoff_expiry = expiry
        self.pods[qpi.key] = qpi
        item = (expiry, next(self._seq), qpi.key)
        heapq.heappush(self._expiries, item)
        if error:
            self._after_error.add(qpi.key)
        else:
            self._after_error.discard(qpi.key)
            if self.pop_early:
                heapq.heappush(self._early, item)
        return self._expiries[0][2] == qpi.key

    def can_pop_early(self) -> bool:
        """Whether :meth:`pop_earliest` may have a pod to give (the last push was no error)."""
        return bool(self._early)

    def discard(self, key: str) -> QueuedPodInfo | None:
        self._after_error.discard(key)
        return self.pods.pop(key, None)

    def next_expiry(self) -> float | None:
        """When the earliest backoff ends (perhaps of a pod gone since: a stale entry)."""
        return self._expiries[0][0] if self._expiries else None

    def _live(self, item: tuple[float, int, str]) -> QueuedPodInfo | None:
        qpi = self.pods.get(item[2])
        return qpi if qpi is not None and qpi.backoff_expiry == item[0] else None

    def pop_expired(self, now: float) -> list[QueuedPodInfo]:
        """Every pod whose backoff has ended by ``now``, earliest first."""
        done: list[QueuedPodInfo] = []
        expiries = self._expiries
        while expiries and expiries[0][0] <= now:
            item = heapq.heappop(expiries)
            qpi = self._live(item)
            if qpi is not None:
                del self.pods[item[2]]
                self._after_error.discard(item[2])
                done.append(qpi)
        early = self._early  # its head: what was just popped (same order), or stale
        while early and self._live(early[0]) is None:
            heapq.heappop(early)
        return done

    def pop_earliest(self) -> QueuedPodInfo | None:
        """The pod whose backoff ends first, if it backs off for having been unschedulable."""
        while self._early:
            item = heapq.heappop(self._early)
            qpi = self._live(item)
            if qpi is None or item[2] in self._after_error:
                continue  # gone, pushed again since, or backing off after an error now
            del self.pods[item[2]]  # (its entry in the expiry heap is skipped as stale)
            return qpi
        return None
