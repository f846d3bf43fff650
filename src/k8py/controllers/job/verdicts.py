"""Whether a Job has come to an end, and how: pure functions of spec, status and pods.

Upstream: the failure and success checks of ``syncJob`` in
``pkg/controller/job/job_controller.go``. Checked in upstream's order: an
interim condition already written decides (the Job is finishing); then a
``FailJob`` rule (from :mod:`.tracking`); then failed indexes
(``backoffLimitPerIndex``), failures beyond ``backoffLimit`` (with
``restartPolicy: OnFailure``, container restarts count too) and
``activeDeadlineSeconds``; then success: a ``successPolicy`` rule of an Indexed
Job, all indexes, ``completions`` successes, or (no ``completions``, the
work-queue pattern) one success with nothing left running.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from k8py.controllers.job import indexes as ix
from k8py.controllers.job.conditions import MESSAGES, Verdict, find_condition
from k8py.controllers.pod_status import parse_time

__all__ = ["pending_verdict", "failure_verdict", "success_verdict", "success_policy_rule",
           "past_backoff_limit_on_failure"]


def pending_verdict(status: dict[str, Any]) -> Verdict | None:
    """The verdict an interim condition already records (the Job is finishing)."""
    for ctype, kind in (("FailureTarget", "failure"), ("SuccessCriteriaMet", "success")):
        cond = find_condition(status, ctype)
        if cond is not None:
            return Verdict(kind, cond.get("reason", ""), cond.get("message", ""))
    return None


def failure_verdict(job: dict[str, Any], failed: int, failed_indexes: set[int], completed: set[int],
                    active: list[dict[str, Any]], now: datetime) -> Verdict | None:
    spec = job.get("spec") or {}
    per_index = spec.get("backoffLimitPerIndex")
    if per_index is not None:
        max_failed = spec.get("maxFailedIndexes")
        if max_failed is not None and len(failed_indexes) > max_failed:
            return Verdict("failure", "MaxFailedIndexesExceeded", MESSAGES["MaxFailedIndexesExceeded"])
        if failed_indexes and len(failed_indexes | completed) >= (spec.get("completions") or 0):
            return Verdict("failure", "FailedIndexes", MESSAGES["FailedIndexes"])
    elif failed > int(spec.get("backoffLimit", 6)) or past_backoff_limit_on_failure(spec, active):
        return Verdict("failure", "BackoffLimitExceeded", MESSAGES["BackoffLimitExceeded"])
    deadline = spec.get("activeDeadlineSeconds")
    start = parse_time((job.get("status") or {}).get("startTime"))
    if deadline is not None and start is not None and not spec.get("suspend") and \
            (now - start).total_seconds() >= deadline:
        return Verdict("failure", "DeadlineExceeded", MESSAGES["DeadlineExceeded"])
    return None


def success_verdict(spec: dict[str, Any], succeeded: int, completed: set[int],
                    active: list[dict[str, Any]]) -> Verdict | None:
    completions = spec.get("completions")
    if spec.get("completionMode") == "Indexed":
        matched = success_policy_rule(spec, completed)
        if matched is not None:
            return Verdict("success", "SuccessPolicy", f"Matched rules at index {matched}")
        done = completions is not None and len(completed) >= completions
    elif completions is None:
        done = succeeded > 0 and not active
    else:
        done = succeeded >= completions
    if done:
        return Verdict("success", "CompletionsReached", MESSAGES["CompletionsReached"])
    return None


def success_policy_rule(spec: dict[str, Any], completed: set[int]) -> int | None:
    """The first ``successPolicy`` rule the succeeded indexes meet (upstream
    ``matchSuccessPolicy``): all of ``succeededIndexes``, or ``succeededCount``
    of them (of all indexes when no set is given)."""
    completions = int(spec.get("completions") or 0)
    for i, rule in enumerate((spec.get("successPolicy") or {}).get("rules") or ()):
        count = rule.get("succeededCount")
        if rule.get("succeededIndexes") is not None:
            wanted = ix.parse_intervals(rule["succeededIndexes"], completions)
            met = len(completed & wanted) >= count if count is not None else wanted <= completed
        else:
            met = count is not None and len(completed) >= count
        if met:
            return i
    return None


def past_backoff_limit_on_failure(spec: dict[str, Any], active: list[dict[str, Any]]) -> bool:
    """With ``restartPolicy: OnFailure`` the kubelet restarts containers in place:
    their restarts count against ``backoffLimit`` (upstream ``pastBackoffLimitOnFailure``)."""
    if ((spec.get("template") or {}).get("spec") or {}).get("restartPolicy") != "OnFailure":
        return False
    restarts = sum(int(cs.get("restartCount") or 0) for pod in active
                   for cs in [*((pod.get("status") or {}).get("initContainerStatuses") or ()),
                              *((pod.get("status") or {}).get("containerStatuses") or ())])
    limit = int(spec.get("backoffLimit", 6))
    return restarts > 0 if limit == 0 else restarts >= limit
