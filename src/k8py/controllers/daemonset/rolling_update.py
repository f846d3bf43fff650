"""The DaemonSet rolling update as a plan: which old pods to delete, where to surge.

Upstream: ``rollingUpdate`` in ``pkg/controller/daemon/update.go``. Per node
that should run the daemon pod, the pods are split into *new* (the current
revision's hash) and *old*. A node is *unavailable* when none of its pods is
available. Then:

- a node whose new pod is available loses its old pods;
- old pods that are not available are deleted at once (they serve nothing);
- ``maxSurge`` 0: old available pods are deleted while fewer than
  ``maxUnavailable`` nodes are unavailable (the replacement comes through the
  normal "no pod on this node" path);
- ``maxSurge`` > 0: a new pod is started beside an old available one on at most
  ``maxSurge`` nodes at a time (counting nodes already surging); the old one
  goes when the new one is available.

Both budgets are int-or-percent of the desired node count (``maxSurge``
rounded up, ``maxUnavailable`` down, as upstream); if both come out 0,
``maxUnavailable`` is 1. Pure: availability is a callable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from k8py.controllers.history import revision_of_pod

__all__ = ["RollingPlan", "plan_rolling_update", "scaled_value"]

Pod = dict[str, Any]


def scaled_value(value: Any, total: int, *, round_up: bool) -> int:
    """An int-or-percent (``maxUnavailable: 10%``) against ``total``."""
    if isinstance(value, str) and value.endswith("%"):
        fraction = int(value[:-1]) * total / 100
        return math.ceil(fraction) if round_up else math.floor(fraction)
    return int(value or 0)


@dataclass
class RollingPlan:
    create_on: list[str] = field(default_factory=list)
    delete: list[Pod] = field(default_factory=list)


def plan_rolling_update(desired: list[str], pods_by_node: dict[str, list[Pod]], current_hash: str, *,
                        rolling: dict[str, Any], available: Callable[[Pod], bool]) -> RollingPlan:
    max_surge = scaled_value(rolling.get("maxSurge", 0), len(desired), round_up=True)
    max_unavailable = scaled_value(rolling.get("maxUnavailable", 1), len(desired), round_up=False)
    if max_surge == 0 and max_unavailable == 0:
        max_unavailable = 1
    plan = RollingPlan()
    unavailable = surging = 0
    old_available: list[tuple[str, Pod]] = []
    for node_name in desired:
        here = pods_by_node.get(node_name, [])
        new = [p for p in here if revision_of_pod(p) == current_hash]
        old = [p for p in here if revision_of_pod(p) != current_hash]
        new_ok = any(available(p) for p in new)
        old_ok = [p for p in old if available(p)]
        if not new_ok and not old_ok:
            unavailable += 1
        if not old:
            continue
        if new:
            if new_ok:
                plan.delete.extend(old)  # the replacement is up: the old pod goes
            else:
                surging += 1
            continue
        if not old_ok:
            plan.delete.extend(old)  # already unavailable: replacing it costs nothing
        else:
            old_available.append((node_name, old_ok[0]))
    if max_surge > 0:
        plan.create_on = [node for node, _ in old_available[:max(0, max_surge - surging)]]
    else:
        plan.delete.extend(pod for _, pod in old_available[:max(0, max_unavailable - unavailable)])
    return plan
