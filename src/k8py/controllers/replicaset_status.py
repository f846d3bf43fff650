"""The status a ReplicaSet (or ReplicationController) should have, from its
claimed active pods (pure; upstream ``calculateStatus``).

- ``replicas``: the pods claimed; ``fullyLabeledReplicas``: those carrying
  every label of the template; ``readyReplicas``: those Ready;
  ``availableReplicas``: those Ready for at least ``minReadySeconds``;
- ``observedGeneration`` is carried over (the caller sets the new one);
- the ReplicaFailure condition appears with the first failed create or
  delete of a sync (FailedCreate / FailedDelete, its message the error's) and
  goes once a sync manages replicas without error.

A sync of a ReplicaSet of 10,000 pods runs this over each of them, so the
loop is one inlined pass.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Mapping

from k8py.controllers.pod_status import format_time, parse_time, pod_ready_condition

__all__ = ["calculate_status", "only_observed_generation_differs", "replicas_of"]


def replicas_of(rs: Mapping[str, Any]) -> int:
    """``spec.replicas`` (1 when unset, the API default)."""
    value = (rs.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def calculate_status(rs: Mapping[str, Any], pods: list[Any], manage_error: Exception | None, now: datetime) -> dict[str, Any]:
    """The status ``rs`` should have given its claimed active ``pods`` (pure)."""
    spec = rs.get("spec") or {}
    min_ready = int(spec.get("minReadySeconds") or 0)
    template_labels = (((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}).items()
    min_ready_for = timedelta(seconds=min_ready)
    fully = ready = available = 0
    # one pass, inlined: a sync of a ReplicaSet of 10,000 pods runs this for each
    for pod in pods:
        if template_labels <= ((pod.get("metadata") or {}).get("labels") or {}).items():
            fully += 1
        condition = pod_ready_condition(pod)
        if condition is not None and condition.get("status") == "True":
            ready += 1
            if min_ready <= 0:
                available += 1
            else:
                since = parse_time(condition.get("lastTransitionTime"))
                if since is not None and since + min_ready_for <= now:
                    available += 1
    old = rs.get("status") or {}
    conditions = [dict(c) for c in old.get("conditions") or ()]
    failure = next((c for c in conditions if c.get("type") == "ReplicaFailure"), None)
    if manage_error is not None and failure is None:
        reason = "FailedCreate" if len(pods) - replicas_of(rs) < 0 else "FailedDelete"
        message = getattr(manage_error, "message", None) or str(manage_error)
        conditions.append({"type": "ReplicaFailure", "status": "True", "lastTransitionTime": format_time(now),
                           "reason": reason, "message": message})
    elif manage_error is None and failure is not None:
        conditions = [c for c in conditions if c.get("type") != "ReplicaFailure"]
    status: dict[str, Any] = {"replicas": len(pods)}
    for field, value in (("fullyLabeledReplicas", fully), ("readyReplicas", ready), ("availableReplicas", available)):
        if value:
            status[field] = value
    if old.get("observedGeneration") is not None:
        status["observedGeneration"] = old["observedGeneration"]
    if conditions:
        status["conditions"] = conditions
    return status


def only_observed_generation_differs(rs: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    """Whether writing ``status`` would change nothing but ``observedGeneration``."""
    old = rs.get("status") or {}
    return {k: v for k, v in old.items() if k != "observedGeneration"} == \
        {k: v for k, v in status.items() if k != "observedGeneration"}
