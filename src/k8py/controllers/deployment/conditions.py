"""Deployment status and its Progressing / Available / ReplicaFailure conditions (pure).

Reasons as upstream (``pkg/controller/deployment/util``): Progressing is
``NewReplicaSetCreated``, ``FoundNewReplicaSet``, ``ReplicaSetUpdated``,
``NewReplicaSetAvailable``, ``ProgressDeadlineExceeded``,
``DeploymentPaused``/``DeploymentResumed`` (status Unknown) or
``ReplicaSetCreateError``; Available is ``MinimumReplicasAvailable`` /
``MinimumReplicasUnavailable``.

:func:`set_condition` keeps ``lastTransitionTime`` while the status does not
change and does nothing when status and reason are unchanged (so
``lastUpdateTime`` only moves when the reason does), except for the
Progressing condition during a rollout: every observed bit of progress
refreshes ``lastUpdateTime``, which the progress deadline counts from.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Mapping

from k8py.controllers.deployment.replica_sets import (
    available_of,
    max_unavailable,
    ready_of,
    replicas_of,
    status_replicas,
)
from k8py.controllers.pod_status import format_time, parse_time

__all__ = [
    "PROGRESSING", "AVAILABLE", "REPLICA_FAILURE", "new_condition", "get_condition", "set_condition",
    "remove_condition", "calculate_status", "deployment_complete", "deployment_progressing", "deployment_timed_out",
    "has_progress_deadline",
]

PROGRESSING = "Progressing"
AVAILABLE = "Available"
REPLICA_FAILURE = "ReplicaFailure"

NEW_RS_REASON = "NewReplicaSetCreated"
FOUND_NEW_RS_REASON = "FoundNewReplicaSet"
RS_UPDATED_REASON = "ReplicaSetUpdated"
NEW_RS_AVAILABLE_REASON = "NewReplicaSetAvailable"
TIMED_OUT_REASON = "ProgressDeadlineExceeded"
PAUSED_REASON = "DeploymentPaused"
RESUMED_REASON = "DeploymentResumed"
FAILED_RS_CREATE_REASON = "ReplicaSetCreateError"
MIN_AVAILABLE_REASON = "MinimumReplicasAvailable"
MIN_UNAVAILABLE_REASON = "MinimumReplicasUnavailable"

_MAX_INT32 = 2**31 - 1


def new_condition(kind: str, status: str, reason: str, message: str, now: datetime) -> dict[str, Any]:
    stamp = format_time(now)
    return {"type": kind, "status": status, "lastUpdateTime": stamp, "lastTransitionTime": stamp,
            "reason": reason, "message": message}


def get_condition(status: Mapping[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in status.get("conditions") or ():
        if cond.get("type") == kind:
            return cond
    return None


def set_condition(status: dict[str, Any], condition: dict[str, Any]) -> None:
    current = get_condition(status, condition["type"])
    if current is not None and current.get("status") == condition["status"] and current.get("reason") == condition["reason"]:
        return
    if current is not None and current.get("status") == condition["status"]:
        condition = {**condition, "lastTransitionTime": current.get("lastTransitionTime")}
    status["conditions"] = [c for c in status.get("conditions") or () if c.get("type") != condition["type"]] + [condition]


def remove_condition(status: dict[str, Any], kind: str) -> None:
    conditions = [c for c in status.get("conditions") or () if c.get("type") != kind]
    if conditions:
        status["conditions"] = conditions
    else:
        status.pop("conditions", None)


def has_progress_deadline(deployment: Mapping[str, Any]) -> bool:
    value = (deployment.get("spec") or {}).get("progressDeadlineSeconds")
    return value is not None and int(value) != _MAX_INT32


def calculate_status(all_rss: list[Any], new_rs: Any | None, deployment: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """The Deployment's status from its ReplicaSets (upstream ``calculateStatus``)."""
    rss = [rs for rs in all_rss if rs is not None]
    available = sum(available_of(rs) for rs in rss)
    total = sum(replicas_of(rs) for rs in rss)
    old = deployment.get("status") or {}
    status: dict[str, Any] = {
        "observedGeneration": (deployment.get("metadata") or {}).get("generation"),
        "replicas": sum(status_replicas(rs) for rs in rss),
        "updatedReplicas": status_replicas(new_rs),
        "readyReplicas": sum(ready_of(rs) for rs in rss),
        "availableReplicas": available,
        "unavailableReplicas": max(total - available, 0),
    }
    if old.get("collisionCount") is not None:
        status["collisionCount"] = old["collisionCount"]
    if old.get("conditions"):
        status["conditions"] = [dict(c) for c in old["conditions"]]
    if available >= replicas_of(deployment) - max_unavailable(deployment):
        set_condition(status, new_condition(AVAILABLE, "True", MIN_AVAILABLE_REASON, "Deployment has minimum availability.", now))
    else:
        set_condition(status, new_condition(AVAILABLE, "False", MIN_UNAVAILABLE_REASON, "Deployment does not have minimum availability.", now))
    # upstream omits zero counts (omitempty) except replicas-style fields it always writes
    for field in ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas", "unavailableReplicas"):
        if not status[field]:
            del status[field]
    return status


def _count(status: Mapping[str, Any], field: str) -> int:
    return int(status.get(field) or 0)


def deployment_complete(deployment: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    want = replicas_of(deployment)
    return (_count(status, "updatedReplicas") == want and _count(status, "replicas") == want
            and _count(status, "availableReplicas") == want
            and int(status.get("observedGeneration") or 0) >= int((deployment.get("metadata") or {}).get("generation") or 0))


def deployment_progressing(deployment: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    old = deployment.get("status") or {}
    old_old = _count(old, "replicas") - _count(old, "updatedReplicas")
    new_old = _count(status, "replicas") - _count(status, "updatedReplicas")
    return (_count(status, "updatedReplicas") > _count(old, "updatedReplicas") or new_old < old_old
            or _count(status, "readyReplicas") > _count(old, "readyReplicas")
            or _count(status, "availableReplicas") > _count(old, "availableReplicas"))


def deployment_timed_out(deployment: Mapping[str, Any], status: Mapping[str, Any], now: datetime) -> bool:
    if not has_progress_deadline(deployment):
        return False
    cond = get_condition(status, PROGRESSING)
    if cond is None or cond.get("reason") == NEW_RS_AVAILABLE_REASON:
        return False
    if cond.get("reason") == TIMED_OUT_REASON:
        return True
    since = parse_time(cond.get("lastUpdateTime"))
    if since is None:
        return False
    deadline = int((deployment.get("spec") or {}).get("progressDeadlineSeconds") or 0)
    return since + timedelta(seconds=deadline) < now
