"""Taints and tolerations as the node lifecycle controllers use them.

Pure functions, shared by ``node_lifecycle`` (which taints nodes from their
conditions) and ``taint_eviction`` (which evicts pods that do not tolerate a
``NoExecute`` taint). The matching rule, upstream's ``ToleratesTaint``, is
:mod:`k8py.api.taints` (shared with the scheduler and the DaemonSet controller).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from k8py.api.taints import tolerates, untolerated

__all__ = [
    "NOT_READY", "UNREACHABLE", "UNSCHEDULABLE", "CONDITION_TAINTS", "tolerates",
    "min_toleration_seconds", "untolerated",
]

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"

CONDITION_TAINTS: dict[tuple[str, str], str] = {
    # (condition type, status) -> NoSchedule taint key (upstream nodeConditionToTaintKeyStatusMap)
    ("Ready", "False"): NOT_READY,
    ("Ready", "Unknown"): UNREACHABLE,
    ("MemoryPressure", "True"): "node.kubernetes.io/memory-pressure",
    ("DiskPressure", "True"): "node.kubernetes.io/disk-pressure",
    ("PIDPressure", "True"): "node.kubernetes.io/pid-pressure",
    ("NetworkUnavailable", "True"): "node.kubernetes.io/network-unavailable",
}


def min_toleration_seconds(taints: Iterable[Mapping[str, Any]], tolerations: list[Mapping[str, Any]]) -> float | None:
    """Upstream ``getMinTolerationTime`` over the tolerations used for ``taints``:
    the smallest ``tolerationSeconds`` (negative counts as 0); ``None`` = forever."""
    used = [tol for tol in tolerations if any(tolerates(tol, t) for t in taints)]
    seconds = [max(0.0, float(tol["tolerationSeconds"])) for tol in used if tol.get("tolerationSeconds") is not None]
    return min(seconds) if seconds else None
