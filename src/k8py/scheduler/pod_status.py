"""What the scheduler writes about a pod besides the binding: the
``PodScheduled=False`` condition with the reason and message of a failure,
``status.nominatedNodeName`` from preemption, and the Events
(``Scheduled`` / ``FailedScheduling``) with upstream's wording.

Status is written only when it changes (condition status, reason and
message, or the nominated node), as upstream's ``updatePod``: a pod retried
every few seconds does not write its status each time.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

__all__ = ["scheduled_message", "unschedulable_condition", "status_patch", "condition_changed",
           "REASON_UNSCHEDULABLE", "REASON_SCHEDULER_ERROR", "REASON_SCHEDULING_GATED"]

Object = dict[str, Any]

REASON_UNSCHEDULABLE = "Unschedulable"
REASON_SCHEDULER_ERROR = "SchedulerError"
REASON_SCHEDULING_GATED = "SchedulingGated"


def scheduled_message(namespace: str, name: str, node: str) -> str:
    return f"Successfully assigned {namespace}/{name} to {node}"


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def unschedulable_condition(reason: str, message: str, *, now: str | None = None) -> Object:
    return {"type": "PodScheduled", "status": "False", "reason": reason, "message": message,
            "lastProbeTime": None, "lastTransitionTime": now or _now()}


def _current(pod: Object) -> Object | None:
    for c in (pod.get("status") or {}).get("conditions") or ():
        if c.get("type") == "PodScheduled":
            return c
    return None


def condition_changed(pod: Object, condition: Object) -> bool:
    cur = _current(pod)
    return cur is None or any(cur.get(k) != condition.get(k) for k in ("status", "reason", "message"))


def status_patch(pod: Object, condition: Object | None, nominated_node: str | None) -> Object | None:
    """A strategic-merge patch for the pod's status, or ``None`` when nothing changes.
    ``nominated_node``: ``None`` leaves it alone, ``""`` clears it."""
    status: Object = {}
    if condition is not None and condition_changed(pod, condition):
        cur = _current(pod)
        if cur is not None and cur.get("status") == condition.get("status"):
            condition = {**condition, "lastTransitionTime": cur.get("lastTransitionTime") or condition["lastTransitionTime"]}
        status["conditions"] = [condition]
    if nominated_node is not None:
        have = (pod.get("status") or {}).get("nominatedNodeName") or ""
        if have != nominated_node:
            status["nominatedNodeName"] = nominated_node or None
    return {"status": status} if status else None
