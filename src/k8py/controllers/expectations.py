"""Expectations: what a controller has asked for and not yet seen in its cache.

A ReplicaSet that creates 3 pods must not create 3 more on its next sync just
because its informer has not delivered the first 3 yet. So before it acts it
records *expectations* (``expect_creations(key, 3)``); every pod ADDED event
for it lowers them (``creation_observed``), and ``sync`` only manages replicas
once :meth:`ControllerExpectations.satisfied` (client-go's
``ControllerExpectations``, kept under ``pkg/controller``).

Rules, as upstream:

- no record for a key means satisfied (a controller never seen, or deleted);
- a record is satisfied when both counts are <= 0, or when it is older than
  :data:`EXPECTATIONS_TIMEOUT` (5 minutes): a lost watch event must not wedge a
  controller forever;
- a failed create/delete lowers the expectation itself, since no event will
  come for it.

:class:`UIDTrackingExpectations` also remembers *which* pods a deletion is
waiting for, so that a pod deleted by someone else is not counted twice, and
*which* pods the server has acknowledged creating that the cache has not
shown yet (:meth:`~UIDTrackingExpectations.created`). Those are known to
exist, so a controller may count them beside its cache and go on creating
while their watch events are still on the way
(:meth:`~UIDTrackingExpectations.creations_in_flight`): a scale-up of
thousands then does not drain to nothing every 500 pods waiting for the
watch to catch up, and still never overshoots, since every pod it asked for
is either in the cache or in that set (a create that failed, or whose
answer is unknown, never enters it and lowers the count as before). The set
follows the count's five-minute timeout: once a record has expired, the
cache alone is trusted again, as upstream.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from k8py.client.clock import Clock, RealClock

__all__ = ["ControllerExpectations", "UIDTrackingExpectations", "EXPECTATIONS_TIMEOUT"]

EXPECTATIONS_TIMEOUT = 300.0


@dataclass
class _Record:
    add: int
    delete: int
    timestamp: float


class ControllerExpectations:
    """Per-key pending creates and deletes; see the module docstring."""

    def __init__(self, *, clock: Clock | None = None, timeout: float = EXPECTATIONS_TIMEOUT) -> None:
        self._clock: Clock = clock if clock is not None else RealClock()
        self._timeout = timeout
        self._records: dict[str, _Record] = {}

    def get(self, key: str) -> tuple[int, int] | None:
        record = self._records.get(key)
        return None if record is None else (record.add, record.delete)

    def satisfied(self, key: str) -> bool:
        record = self._records.get(key)
        if record is None:
            return True
        if record.add <= 0 and record.delete <= 0:
            return True
        return self._clock.monotonic() - record.timestamp > self._timeout

    def set(self, key: str, add: int, delete: int) -> None:
        self._records[key] = _Record(add, delete, self._clock.monotonic())

    def expect_creations(self, key: str, adds: int) -> None:
        self.set(key, adds, 0)

    def expired(self, key: str) -> bool:
        """A record that has waited longer than the timeout (it counts as satisfied)."""
        record = self._records.get(key)
        return record is not None and self._clock.monotonic() - record.timestamp > self._timeout

    def expect_deletions(self, key: str, dels: int) -> None:
        self.set(key, 0, dels)

    def raise_expectations(self, key: str, add: int, delete: int) -> None:
        record = self._records.get(key)
        if record is not None:
            record.add += add
            record.delete += delete

    def lower_expectations(self, key: str, add: int, delete: int) -> None:
        record = self._records.get(key)
        if record is not None:
            record.add -= add
            record.delete -= delete

    def creation_observed(self, key: str) -> None:
        self.lower_expectations(key, 1, 0)

    def deletion_observed(self, key: str) -> None:
        self.lower_expectations(key, 0, 1)

    def delete(self, key: str) -> None:
        self._records.pop(key, None)


class UIDTrackingExpectations(ControllerExpectations):
    """Deletions tracked by the deleted objects' keys (upstream tracks pod keys too)."""

    def __init__(self, *, clock: Clock | None = None, timeout: float = EXPECTATIONS_TIMEOUT) -> None:
        super().__init__(clock=clock, timeout=timeout)
        self._pending_deletes: dict[str, set[str]] = {}
        self._unseen_creates: dict[str, set[str]] = {}

    def expect_more_creations(self, key: str, adds: int) -> None:
        """Expect ``adds`` more creations on top of those still unobserved (the
        record's clock starts again, as a fresh ``expect_creations``)."""
        record = self._records.get(key)
        still = max(record.add, 0) if record is not None and not self.expired(key) else 0
        self.set(key, still + adds, 0)

    def created(self, key: str, created_key: str) -> None:
        """The server acknowledged creating ``created_key`` for ``key`` and the cache
        has not shown it yet (call only then)."""
        self._unseen_creates.setdefault(key, set()).add(created_key)

    def creation_seen(self, key: str, created_key: str) -> None:
        """The cache has shown ``created_key`` (or its deletion): no longer in flight."""
        unseen = self._unseen_creates.get(key)
        if unseen is not None:
            unseen.discard(created_key)
            if not unseen:
                del self._unseen_creates[key]

    def creations_in_flight(self, key: str, in_cache: Callable[[str], bool]) -> int | None:
        """How many acknowledged creations the cache has not shown yet, when the
        only thing ``key`` waits for is creations (no deletion pending, record not
        expired); ``None`` otherwise. ``in_cache`` prunes those seen meanwhile."""
        record = self._records.get(key)
        if record is None or self.expired(key):
            self._unseen_creates.pop(key, None)
            return 0
        if record.delete > 0:
            return None
        unseen = self._unseen_creates.get(key)
        if unseen:
            unseen.difference_update([k for k in unseen if in_cache(k)])
        return len(unseen) if unseen else 0

    def expect_deletions_of(self, key: str, deleted_keys: list[str]) -> None:
        self._pending_deletes[key] = set(deleted_keys)
        self.expect_deletions(key, len(deleted_keys))

    def deletion_observed_of(self, key: str, deleted_key: str) -> None:
        pending = self._pending_deletes.get(key)
        if pending is not None and deleted_key in pending:
            pending.discard(deleted_key)
            self.deletion_observed(key)

    def pending_deletions(self, key: str) -> set[str]:
        return set(self._pending_deletes.get(key, ()))

    def delete(self, key: str) -> None:
        super().delete(key)
        self._pending_deletes.pop(key, None)
        self._unseen_creates.pop(key, None)
