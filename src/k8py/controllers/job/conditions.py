"""Job conditions and the decision whether a Job has finished.

Upstream: ``pkg/controller/job/job_controller.go`` (``newCondition``,
``ensureJobConditionStatus``, the failure and success checks of ``syncJob``).
Since 1.31 a finishing Job first gets an interim condition and only then the
terminal one, once none of its pods is still running or terminating:

- failure: ``FailureTarget`` then ``Failed``, both with one of the reasons
  ``BackoffLimitExceeded``, ``DeadlineExceeded``, ``PodFailurePolicy``,
  ``FailedIndexes``, ``MaxFailedIndexesExceeded``;
- success: ``SuccessCriteriaMet`` then ``Complete`` (reason
  ``CompletionsReached``, or ``SuccessPolicy`` when a ``successPolicy`` rule
  of an Indexed Job matched), with ``status.completionTime``.

``Suspended`` is ``True`` (``JobSuspended``) while ``spec.suspend`` holds and
turns ``False`` (``JobResumed``) when it is lifted. All functions here are
pure: they read and edit a status dict and take ``now`` as an argument.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

__all__ = ["Verdict", "find_condition", "is_finished", "set_condition", "MESSAGES"]

MESSAGES = {
    "BackoffLimitExceeded": "Job has reached the specified backoff limit",
    "DeadlineExceeded": "Job was active longer than specified deadline",
    "FailedIndexes": "Job has failed indexes",
    "MaxFailedIndexesExceeded": "Job has exceeded the specified maximal number of failed indexes",
    "CompletionsReached": "Reached expected number of succeeded pods",
}


@dataclass(frozen=True)
class Verdict:
    """What the Job has come to: ``kind`` is "failure" or "success"."""

    kind: str
    reason: str
    message: str


def find_condition(status: Mapping[str, Any], ctype: str) -> Mapping[str, Any] | None:
    for cond in status.get("conditions") or ():
        if cond.get("type") == ctype and cond.get("status") == "True":
            return cond
    return None


def is_finished(job: Mapping[str, Any]) -> bool:
    status = job.get("status") or {}
    return find_condition(status, "Complete") is not None or find_condition(status, "Failed") is not None


def set_condition(status: dict[str, Any], ctype: str, cstatus: str, reason: str, message: str, now: str) -> bool:
    """Add or update a condition; returns whether anything changed. The
    transition time moves only when the status flips."""
    conditions = status.setdefault("conditions", [])
    for cond in conditions:
        if cond.get("type") == ctype:
            if cond.get("status") == cstatus and cond.get("reason") == reason and cond.get("message") == message:
                return False
            if cond.get("status") != cstatus:
                cond["lastTransitionTime"] = now
            cond.update({"status": cstatus, "reason": reason, "message": message, "lastProbeTime": now})
            return True
    conditions.append({"type": ctype, "status": cstatus, "reason": reason, "message": message,
                       "lastProbeTime": now, "lastTransitionTime": now})
    return True
