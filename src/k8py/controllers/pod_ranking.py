"""Which pods to delete first when scaling down (upstream ``ActivePodsWithRanks``).

The least valuable pod sorts first. The order, as ``pkg/controller``'s
``ActivePodsWithRanks.Less`` with the LogarithmicScaleDown rules:

1. unassigned (no ``nodeName``) before assigned;
2. ``Pending`` before ``Unknown`` before ``Running``;
3. not ready before ready;
4. lower ``controller.kubernetes.io/pod-deletion-cost`` first;
5. higher *rank* first (rank: how many related pods share the pod's node,
   so doubled-up nodes are thinned first);
6. ready for less time first, compared on a log2 scale of seconds, so pods
   that became ready a few seconds apart count as equally old;
7. more container restarts first;
8. newer (later creationTimestamp, log2-bucketed like 6) first, then by uid
   for a total order.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any, Mapping

from k8py.controllers.pod_status import is_pod_ready, parse_time, pod_ready_since, restart_count

__all__ = ["deletion_sort_key", "rank_pods_by_node", "pods_to_delete", "DELETION_COST_ANNOTATION"]

DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"
_PHASE_ORDER = {"Pending": 0, "Unknown": 1, "Running": 2}


def _log_bucket(when: datetime | None, now: datetime) -> float:
    """Larger for more recent times (so "newer first" sorts ascending on the negation)."""
    if when is None:
        return math.inf  # no time: treated as the newest
    age = max((now - when).total_seconds(), 0.0)
    return -math.floor(math.log2(age + 1))


def _deletion_cost(pod: Mapping[str, Any]) -> int:
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(DELETION_COST_ANNOTATION)
    try:
        return int(raw) if raw is not None else 0
    except ValueError:
        return 0


def deletion_sort_key(pod: Mapping[str, Any], rank: int, now: datetime) -> tuple[Any, ...]:
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    ready = is_pod_ready(pod)
    return (
        1 if spec.get("nodeName") else 0,
        _PHASE_ORDER.get((pod.get("status") or {}).get("phase") or "", 3),
        1 if ready else 0,
        _deletion_cost(pod),
        -rank,
        -_log_bucket(pod_ready_since(pod), now) if ready else 0,
        -restart_count(pod),
        -_log_bucket(parse_time(meta.get("creationTimestamp")), now),
        meta.get("uid") or "",
    )


def rank_pods_by_node(pods: list[Any], related: list[Any]) -> list[int]:
    """For each pod, how many of ``related`` (active pods of the same owner family) share its node."""
    per_node: dict[str, int] = {}
    for pod in related:
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            per_node[node] = per_node.get(node, 0) + 1
    return [per_node.get((p.get("spec") or {}).get("nodeName") or "", 0) for p in pods]


def pods_to_delete(pods: list[Any], related: list[Any], count: int, now: datetime) -> list[Any]:
    """The ``count`` least valuable of ``pods``."""
    if count >= len(pods):
        return list(pods)
    ranks = rank_pods_by_node(pods, related)
    order = sorted(range(len(pods)), key=lambda i: deletion_sort_key(pods[i], ranks[i], now))
    return [pods[i] for i in order[:count]]
