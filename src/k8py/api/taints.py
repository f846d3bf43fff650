"""Taints and tolerations: which toleration tolerates which taint.

Upstream's ``Toleration.ToleratesTaint`` (k8s.io/api core/v1 helpers): the one
rule the scheduler's TaintToleration and NodeUnschedulable plugins, the
DaemonSet controller's node eligibility and the taint-eviction controller
all apply, so it lives here, below every component.

- An empty ``effect`` matches every effect; an empty ``key`` (with
  ``Exists``) matches every key.
- ``operator`` defaults to ``Equal``; ``Equal`` compares values (absent is
  ``""``), ``Exists`` ignores them; any other operator tolerates nothing.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

__all__ = ["tolerates", "untolerated"]


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Whether ``toleration`` tolerates ``taint``."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    return operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


def untolerated(taints: Iterable[Mapping[str, Any]], tolerations: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The taints that no toleration tolerates, in order."""
    return [t for t in taints if not any(tolerates(tol, t) for tol in tolerations)]
