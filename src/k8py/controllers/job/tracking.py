"""Counting a Job's finished pods exactly once (the job-tracking finalizer).

Upstream: ``trackJobStatusAndRemoveFinalizers`` in
``pkg/controller/job/job_controller.go``. Every pod of a Job carries the
``batch.kubernetes.io/job-tracking`` finalizer, so it cannot vanish before it
has been counted. :func:`tally_finished_pods` is the *plan* half: from the
Job's spec and status and its pods it works out which finished pods are new
(their uids join ``status.uncountedTerminatedPods``), which pods may lose the
finalizer, what completed and failed indexes result, and whether a
``FailJob`` rule matched. The controller then acts in the crash-safe order:
write the uncounted uids, remove the finalizers, move the uids into the counts.

Rules (upstream's):

- a pod already listed as uncounted is only released again (idempotent);
- a pod deleted because the Job succeeded is released, not counted;
- a failed pod is matched against the pod failure policy; ``Ignore`` releases
  it uncounted; with ``backoffLimitPerIndex`` its index fails once it has
  failed more often than the limit (or on ``FailIndex``);
- a deleted pod that never succeeded counts as failed (:func:`is_failed`)
  unless the Job waits for pods to reach ``Failed``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from k8py.controllers.job import indexes as ix
from k8py.controllers.job.conditions import Verdict, find_condition
from k8py.controllers.job.pod_failure_policy import match_pod_failure_policy

__all__ = ["TRACKING_FINALIZER", "Tally", "tally_finished_pods", "set_uncounted", "is_failed", "terminal", "deleting",
           "has_finalizer"]

TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
Object = dict[str, Any]


def terminal(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def deleting(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def has_finalizer(pod: Mapping[str, Any]) -> bool:
    return TRACKING_FINALIZER in ((pod.get("metadata") or {}).get("finalizers") or ())


def is_failed(pod: Mapping[str, Any], spec: Mapping[str, Any]) -> bool:
    """Upstream ``isPodFailed``: a deleted pod that never succeeded counts as failed
    unless the Job waits for pods to reach ``Failed`` (podFailurePolicy, or
    ``podReplacementPolicy: Failed``)."""
    phase = (pod.get("status") or {}).get("phase")
    if phase == "Failed":
        return True
    if spec.get("podFailurePolicy") is not None or spec.get("podReplacementPolicy") == "Failed":
        return False
    return deleting(pod) and phase != "Succeeded"


@dataclass
class Tally:
    uncounted_succeeded: list[str]
    uncounted_failed: list[str]
    completed: set[int]
    failed_indexes: set[int]
    to_release: list[Object] = field(default_factory=list)
    fail_job: Verdict | None = None
    new_failures: int = 0
    new_successes: int = 0


def tally_finished_pods(spec: Mapping[str, Any], status: Mapping[str, Any], pods: list[Object]) -> Tally:
    indexed = spec.get("completionMode") == "Indexed"
    completions = spec.get("completions") or 0
    uncounted = status.get("uncountedTerminatedPods") or {}
    tally = Tally(
        uncounted_succeeded=list(uncounted.get("succeeded") or []),
        uncounted_failed=list(uncounted.get("failed") or []),
        completed=ix.parse_intervals(status.get("completedIndexes"), completions) if indexed else set(),
        failed_indexes=ix.parse_intervals(status.get("failedIndexes"), completions) if indexed else set(),
    )
    finishing_success = find_condition(status, "SuccessCriteriaMet") is not None
    finishing_failure = find_condition(status, "FailureTarget") is not None
    per_index = spec.get("backoffLimitPerIndex")
    for pod in pods:
        if not has_finalizer(pod):
            continue
        uid = pod["metadata"]["uid"]
        if uid in tally.uncounted_succeeded or uid in tally.uncounted_failed:
            tally.to_release.append(pod)
            continue
        phase = (pod.get("status") or {}).get("phase")
        if finishing_success and phase != "Succeeded" and deleting(pod):
            tally.to_release.append(pod)  # removed because the Job succeeded: not a failure
            continue
        index = ix.pod_index(pod, completions) if indexed else None
        if phase == "Succeeded":
            tally.to_release.append(pod)
            if indexed and index is None:
                continue
            tally.uncounted_succeeded.append(uid)
            tally.new_successes += 1
            if index is not None:
                tally.completed.add(index)
        elif is_failed(pod, spec):
            tally.to_release.append(pod)
            match = match_pod_failure_policy(spec.get("podFailurePolicy"), pod)
            if not match.counts:
                continue
            tally.uncounted_failed.append(uid)
            tally.new_failures += 1
            if match.action == "FailJob" and tally.fail_job is None:
                tally.fail_job = Verdict("failure", "PodFailurePolicy", match.message or "")
            if index is not None and per_index is not None:
                failures = ix.annotation_int(pod, ix.INDEX_FAILURE_COUNT) + 1
                if match.action == "FailIndex" or failures > per_index:
                    tally.failed_indexes.add(index)
        elif deleting(pod) and finishing_failure:
            tally.to_release.append(pod)  # a failing Job lets go of the pods it deleted
    return tally


def set_uncounted(uncounted: dict[str, Any], succeeded: list[str], failed: list[str]) -> None:
    """Write the uncounted uids into ``status.uncountedTerminatedPods``.

    Empty lists are omitted, as Go's ``omitempty`` writes ``uncountedTerminatedPods: {}``.
    """
    for key, uids in (("succeeded", succeeded), ("failed", failed)):
        if uids:
            uncounted[key] = uids
        else:
            uncounted.pop(key, None)
