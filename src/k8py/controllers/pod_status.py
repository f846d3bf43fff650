"""Pod readiness and availability, as the workload controllers read them.

- *active*: not ``Succeeded``/``Failed`` and not being deleted
  (``FilterActivePods``);
- *ready*: the ``Ready`` condition is ``True``;
- *available*: ready for at least ``minReadySeconds`` (measured from the Ready
  condition's ``lastTransitionTime``) at ``now``.

Times in objects are RFC 3339 strings; :func:`parse_time` reads them.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Mapping

__all__ = [
    "parse_time",
    "format_time",
    "is_pod_active",
    "is_pod_terminated",
    "is_pod_ready",
    "pod_ready_condition",
    "pod_ready_since",
    "is_pod_available",
    "filter_active_pods",
    "restart_count",
]


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def format_time(when: datetime) -> str:
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _status(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return pod.get("status") or {}


def is_pod_terminated(pod: Mapping[str, Any]) -> bool:
    return _status(pod).get("phase") in ("Succeeded", "Failed")


def is_pod_active(pod: Mapping[str, Any]) -> bool:
    return not is_pod_terminated(pod) and not (pod.get("metadata") or {}).get("deletionTimestamp")


_TERMINAL = ("Succeeded", "Failed")


def filter_active_pods(pods: list[Any]) -> list[Any]:
    # is_pod_active inlined: this runs over every pod of a ReplicaSet on each sync
    return [p for p in pods if (p.get("status") or {}).get("phase") not in _TERMINAL
            and not (p.get("metadata") or {}).get("deletionTimestamp")]


def pod_ready_condition(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for cond in _status(pod).get("conditions") or ():
        if cond.get("type") == "Ready":
            return cond
    return None


def is_pod_ready(pod: Mapping[str, Any]) -> bool:
    cond = pod_ready_condition(pod)
    return cond is not None and cond.get("status") == "True"


def pod_ready_since(pod: Mapping[str, Any]) -> datetime | None:
    """When the pod became ready (``None`` if it is not ready, or no time is recorded)."""
    cond = pod_ready_condition(pod)
    if cond is None or cond.get("status") != "True":
        return None
    return parse_time(cond.get("lastTransitionTime"))


def is_pod_available(pod: Mapping[str, Any], min_ready_seconds: int, now: datetime) -> bool:
    if not is_pod_ready(pod):
        return False
    if min_ready_seconds <= 0:
        return True
    since = pod_ready_since(pod)
    return since is not None and since + timedelta(seconds=min_ready_seconds) <= now


def restart_count(pod: Mapping[str, Any]) -> int:
    return sum(int(c.get("restartCount") or 0) for c in _status(pod).get("containerStatuses") or ())
