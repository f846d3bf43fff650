"""Completion indexes of an Indexed Job: the pod annotation and the interval strings.

Upstream: ``pkg/controller/job/indexed_job_utils.go``. Each pod of an Indexed
Job carries its index in the ``batch.kubernetes.io/job-completion-index``
annotation (and, since 1.28, a label of the same key); the container sees it
as ``JOB_COMPLETION_INDEX`` through a fieldRef to that annotation.
``status.completedIndexes`` and ``status.failedIndexes`` are compressed
interval lists ("1,3-5,7"), sorted and without overlaps.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

__all__ = ["COMPLETION_INDEX", "INDEX_FAILURE_COUNT", "INDEX_IGNORED_FAILURE_COUNT",
           "pod_index", "format_intervals", "parse_intervals", "first_pending_indexes"]

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
INDEX_FAILURE_COUNT = "batch.kubernetes.io/job-index-failure-count"
INDEX_IGNORED_FAILURE_COUNT = "batch.kubernetes.io/job-index-ignored-failure-count"
COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"


def pod_index(pod: Mapping[str, Any], completions: int) -> int | None:
    """The pod's completion index, or None when missing, malformed or out of range."""
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(COMPLETION_INDEX)
    if not isinstance(value, str) or not value.isdigit() or (len(value) > 1 and value[0] == "0"):
        return None
    index = int(value)
    return index if index < completions else None


def annotation_int(pod: Mapping[str, Any], key: str) -> int:
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(key)
    return int(value) if isinstance(value, str) and value.isdigit() else 0


def format_intervals(indexes: Iterable[int]) -> str:
    ordered = sorted(set(indexes))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


def parse_intervals(text: str | None, completions: int) -> set[int]:
    """The indexes in an interval string, keeping only those below ``completions``
    (upstream ignores what does not parse)."""
    out: set[int] = set()
    for part in (text or "").split(","):
        bounds = part.split("-")
        try:
            low = int(bounds[0])
            high = int(bounds[1]) if len(bounds) == 2 else low
        except ValueError:
            continue
        out.update(i for i in range(low, min(high, completions - 1) + 1))
    return out


def first_pending_indexes(completions: int, done: set[int], active: set[int], count: int) -> list[int]:
    """The lowest ``count`` indexes that are neither finished nor running."""
    out: list[int] = []
    for i in range(completions):
        if len(out) >= count:
            break
        if i not in done and i not in active:
            out.append(i)
    return out


def decorate_pod(pod: dict[str, Any], job_name: str, index: int, failure_count: int | None) -> None:
    """Make ``pod`` the pod of ``index``: name prefix, annotation and label,
    hostname, ``JOB_COMPLETION_INDEX`` in every container, and (with
    ``backoffLimitPerIndex``) how often the index failed before."""
    value = str(index)
    meta = pod["metadata"]
    meta["generateName"] = f"{job_name}-{value}-"
    meta.setdefault("annotations", {})[COMPLETION_INDEX] = value
    meta.setdefault("labels", {})[COMPLETION_INDEX] = value
    if failure_count is not None:
        meta["annotations"][INDEX_FAILURE_COUNT] = str(failure_count)
    spec = pod["spec"]
    spec.setdefault("hostname", f"{job_name}-{value}")
    env = {"name": COMPLETION_INDEX_ENV, "valueFrom": {"fieldRef": {
        "apiVersion": "v1", "fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}}}
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        envs = [e for e in container.get("env") or [] if e.get("name") != COMPLETION_INDEX_ENV]
        container["env"] = [*envs, env]
