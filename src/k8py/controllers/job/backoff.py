"""Exponential backoff of a Job's failed pods.

Upstream: ``pkg/controller/job/backoff_utils.go``. A Job remembers how many of
its pods failed since its last success and when the last one failed; a new
pod may be created only ``base * 2**(failures-1)`` (capped) after that
failure. The record lives in the controller's memory, as upstream's
``backoffRecordStore``: after a restart the controller forgets it and starts
the next pod at once, which upstream accepts too. The base and cap come from
the controller's options (10 s and 10 min upstream) so tests can shorten them.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BackoffRecord", "remaining_backoff"]


@dataclass
class BackoffRecord:
    failures_after_last_success: int = 0
    last_failure_monotonic: float | None = None

    def record(self, *, new_failures: int, new_successes: int, now: float) -> None:
        if new_successes:
            self.failures_after_last_success = 0
            self.last_failure_monotonic = None
        if new_failures:
            self.failures_after_last_success += new_failures
            self.last_failure_monotonic = now


def remaining_backoff(record: BackoffRecord, now: float, *, base: float, cap: float) -> float:
    """Seconds until a replacement pod may be created (0 when it may now)."""
    if record.failures_after_last_success == 0 or record.last_failure_monotonic is None:
        return 0.0
    delay = min(cap, base * 2 ** (record.failures_after_last_success - 1))
    return max(0.0, record.last_failure_monotonic + delay - now)
