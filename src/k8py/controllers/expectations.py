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
waiting for, so that a pod deleted by someone else is not counted twice.
"""

from __future__ import annotations

from dataclasses import dataclass

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
