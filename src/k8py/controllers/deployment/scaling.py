"""How many replicas each ReplicaSet of a Deployment should have (pure plans).

The controller computes a plan here and carries it out elsewhere:

- :func:`new_rs_new_replicas`: the new ReplicaSet's size during a rolling
  update: grow while the *total* stays within ``replicas + maxSurge``. The
  total counts each ReplicaSet as ``max(spec.replicas, status.replicas)``, so
  pods that a scaled-down ReplicaSet has not removed yet still count (a
  stricter reading than upstream's spec-only sum: it keeps the surge bound
  exact while the old pods' deletions are in flight);
- :func:`old_rs_cleanup_plan` and :func:`old_rs_scale_down_plan`: shrink old
  ReplicaSets, first by their unavailable pods, then by as many available
  ones as keep ``replicas - maxUnavailable`` available (availability read
  from the ReplicaSets' status, never more than their size);
- :func:`proportional_plan`: a Deployment resized mid-rollout spreads the
  change over its active ReplicaSets in proportion to their sizes (the
  ``max-replicas`` annotation records the total each was sized for), the
  rounding leftover to the largest (upstream ``scale``).
"""

from __future__ import annotations

from typing import Any, Mapping

from k8py.controllers.deployment.replica_sets import (
    active,
    available_of,
    by_creation,
    is_rolling,
    max_replicas_annotation,
    max_surge,
    max_unavailable,
    replicas_of,
    status_replicas,
)

__all__ = ["new_rs_new_replicas", "old_rs_cleanup_plan", "old_rs_scale_down_plan", "proportional_plan", "Plan"]

Plan = list[tuple[Any, int]]
"""(ReplicaSet, new size) pairs, in the order to apply them."""


def _name(rs: Mapping[str, Any]) -> str:
    return (rs.get("metadata") or {}).get("name") or ""


def _pods_counted(rs: Mapping[str, Any]) -> int:
    return max(replicas_of(rs), status_replicas(rs))


def new_rs_new_replicas(deployment: Mapping[str, Any], all_rss: list[Any], new_rs: Mapping[str, Any]) -> int:
    desired = replicas_of(deployment)
    if not is_rolling(deployment):
        return desired
    current = sum(_pods_counted(rs) for rs in all_rss if rs is not None)
    max_total = desired + max_surge(deployment)
    if current >= max_total:
        return replicas_of(new_rs)
    scale_up = min(max_total - current, desired - replicas_of(new_rs))
    return replicas_of(new_rs) + max(scale_up, 0)


def old_rs_cleanup_plan(deployment: Mapping[str, Any], old_rss: list[Any], new_rs: Mapping[str, Any] | None, all_rss: list[Any]) -> tuple[Plan, int]:
    """Scale down unhealthy old replicas first; returns (plan, how many) (upstream ``cleanupUnhealthyReplicas``)."""
    old_count = sum(replicas_of(rs) for rs in old_rss)
    if old_count == 0:
        return [], 0
    all_count = sum(replicas_of(rs) for rs in all_rss if rs is not None)
    min_available = replicas_of(deployment) - max_unavailable(deployment)
    new_unavailable = replicas_of(new_rs) - available_of(new_rs) if new_rs is not None else 0
    max_scaled_down = all_count - min_available - new_unavailable
    if max_scaled_down <= 0:
        return [], 0
    plan: Plan = []
    total = 0
    for rs in by_creation(old_rss):
        if total >= max_scaled_down:
            break
        size = replicas_of(rs)
        if size == 0 or size == available_of(rs):
            continue
        down = min(max_scaled_down - total, size - available_of(rs))
        plan.append((rs, size - down))
        total += down
    return plan, total


def old_rs_scale_down_plan(deployment: Mapping[str, Any], old_rss: list[Any], all_rss: list[Any]) -> Plan:
    """Scale down old ReplicaSets as far as availability allows (upstream ``scaleDownOldReplicaSetsForRollingUpdate``)."""
    min_available = replicas_of(deployment) - max_unavailable(deployment)
    available = sum(available_of(rs) for rs in all_rss if rs is not None)
    if available <= min_available:
        return []
    budget = available - min_available
    plan: Plan = []
    total = 0
    for rs in by_creation(old_rss):
        if total >= budget:
            break
        size = replicas_of(rs)
        if size == 0:
            continue
        down = min(size, budget - total)
        plan.append((rs, size - down))
        total += down
    return plan


def _fraction(rs: Mapping[str, Any], deployment: Mapping[str, Any]) -> int:
    desired = replicas_of(deployment)
    if desired == 0:
        return -replicas_of(rs)
    allowed_total = desired + max_surge(deployment)
    annotated = max_replicas_annotation(rs)
    if annotated is None:
        annotated = int((deployment.get("status") or {}).get("replicas") or 0)
    if annotated == 0:
        return 0
    new_size = replicas_of(rs) * allowed_total / annotated
    return int(new_size + 0.5) - replicas_of(rs)  # Go's math.Round: halves away from zero (sizes are >= 0)


def proportional_plan(deployment: Mapping[str, Any], new_rs: Any | None, old_rss: list[Any]) -> Plan:
    """The sizes after a resize of a Deployment with several active ReplicaSets."""
    if not is_rolling(deployment):
        return []
    rss = active([*old_rss, new_rs])
    current = sum(replicas_of(rs) for rs in rss)
    desired = replicas_of(deployment)
    allowed = desired + max_surge(deployment) if desired > 0 else 0
    to_add = allowed - current
    if to_add > 0:  # bigger first; among equals the newer first
        rss.sort(key=lambda rs: (-replicas_of(rs), _neg_time(rs)))
    elif to_add < 0:  # bigger first; among equals the older first
        rss.sort(key=lambda rs: (-replicas_of(rs), (rs.get("metadata") or {}).get("creationTimestamp") or ""))
    added = 0
    sizes: dict[str, int] = {}
    for rs in rss:
        size = replicas_of(rs)
        if to_add != 0 and size != 0 and to_add != added:
            fraction = _fraction(rs, deployment)
            remaining = to_add - added
            proportion = min(fraction, remaining) if to_add > 0 else max(fraction, remaining)
        else:
            proportion = 0
        sizes[_name(rs)] = size + proportion
        added += proportion
    plan: Plan = []
    for i, rs in enumerate(rss):
        size = sizes[_name(rs)]
        if i == 0 and to_add != 0:
            size = max(size + (to_add - added), 0)
        plan.append((rs, size))
    return plan


def _neg_time(rs: Mapping[str, Any]) -> tuple[int, ...]:
    stamp = (rs.get("metadata") or {}).get("creationTimestamp") or ""
    return tuple(-ord(c) for c in stamp)
