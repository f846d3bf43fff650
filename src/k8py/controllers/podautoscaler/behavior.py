"""Scaling behavior (upstream ``normalizeDesiredReplicasWithBehaviors``):
stabilization windows and rate-limiting policies.

- **Stabilization.** Every recommendation is remembered with its time; the
  one used is, scaling up, the *lowest* recommendation within
  ``scaleUp.stabilizationWindowSeconds`` (default 0) and, scaling down, the
  *highest* within ``scaleDown.stabilizationWindowSeconds`` (default 300), so
  a dip or spike shorter than the window does not move the target.
- **Policies.** Within each policy's ``periodSeconds`` the replicas may grow
  (shrink) by at most ``Pods: value`` or ``Percent: value`` of the count at
  the period's start (known from the scale events remembered);
  ``selectPolicy`` ``Max`` (default) takes the most permissive, ``Min`` the
  least, ``Disabled`` forbids that direction. Defaults as upstream: up 4 pods
  or 100% per 15 s, down 100% per 15 s.

Times are the controller clock's monotonic seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

__all__ = ["Behavior", "History"]

_DEFAULT_UP = {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
               "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15}, {"type": "Percent", "value": 100, "periodSeconds": 15}]}
_DEFAULT_DOWN = {"stabilizationWindowSeconds": 300, "selectPolicy": "Max",
                 "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}


@dataclass
class History:
    recommendations: list[tuple[float, int]] = field(default_factory=list)
    scale_ups: list[tuple[float, int]] = field(default_factory=list)
    scale_downs: list[tuple[float, int]] = field(default_factory=list)


class Behavior:
    def __init__(self, spec: Mapping[str, Any] | None, *, downscale_window: float = 300.0) -> None:
        """``downscale_window``: the scale-down window when the HPA sets none
        (``--horizontal-pod-autoscaler-downscale-stabilization``)."""
        spec = spec or {}
        self.up = {**_DEFAULT_UP, **(spec.get("scaleUp") or {})}
        self.down = {**_DEFAULT_DOWN, "stabilizationWindowSeconds": downscale_window, **(spec.get("scaleDown") or {})}

    def stabilize(self, history: History, now: float, current: int, recommended: int) -> int:
        up_window = float(self.up.get("stabilizationWindowSeconds") or 0)
        down_window = float(self.down.get("stabilizationWindowSeconds") or 0)
        keep = max(up_window, down_window)
        history.recommendations = [(t, r) for t, r in history.recommendations if now - t <= keep]
        history.recommendations.append((now, recommended))
        up_floor = min([r for t, r in history.recommendations if now - t <= up_window] or [recommended])
        down_ceiling = max([r for t, r in history.recommendations if now - t <= down_window] or [recommended])
        if recommended > current:
            return max(current, min(recommended, up_floor))
        if recommended < current:
            return min(current, max(recommended, down_ceiling))
        return current

    def limit(self, history: History, now: float, current: int, desired: int) -> int:
        if desired > current:
            rules, events, sign = self.up, history.scale_ups, 1
        elif desired < current:
            rules, events, sign = self.down, history.scale_downs, -1
        else:
            return current
        select = rules.get("selectPolicy") or "Max"
        if select == "Disabled":
            return current
        bounds = []
        for policy in rules.get("policies") or ():
            period = float(policy.get("periodSeconds") or 15)
            changed = sum(n for t, n in events if now - t <= period)
            start = current - sign * changed
            value = int(policy.get("value") or 0)
            if policy.get("type") == "Pods":
                bounds.append(start + sign * value)
            elif sign > 0:
                bounds.append(math.ceil(start * (1 + value / 100)))
            else:
                bounds.append(math.ceil(start * (1 - value / 100)))
        if not bounds:
            return desired
        if sign > 0:
            bound = max(bounds) if select == "Max" else min(bounds)
            return max(current, min(desired, bound))
        bound = min(bounds) if select == "Max" else max(bounds)
        return min(current, max(desired, bound))

    def bounded(self, history: History, now: float, current: int, desired: int, low: int, high: int) -> tuple[int, str, str]:
        """``desired`` within the rate limits and ``[low, high]``, with the reason and message of
        the ``ScalingLimited`` condition (upstream's ``convertDesiredReplicasWithBehaviorRate``)."""
        if desired > current:
            up = self.limit(history, now, current, 1 << 30)
            if high > up:
                allowed, why = up, ("ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate")
            else:
                allowed, why = high, ("TooManyReplicas", "the desired replica count is more than the maximum replica count")
            if desired > allowed:
                return allowed, *why
        elif desired < current:
            down = self.limit(history, now, current, -(1 << 30))
            if low < down:
                allowed, why = down, ("ScaleDownLimit", "the desired replica count is decreasing faster than the maximum scale rate")
            else:
                allowed, why = low, ("TooFewReplicas", "the desired replica count is less than the minimum replica count")
            if desired < allowed:
                return allowed, *why
        return desired, "DesiredWithinRange", "the desired count is within the acceptable range"

    @staticmethod
    def record(history: History, now: float, old: int, new: int) -> None:
        if new > old:
            history.scale_ups.append((now, new - old))
        elif new < old:
            history.scale_downs.append((now, old - new))
        horizon = 3600.0
        history.scale_ups = [(t, n) for t, n in history.scale_ups if now - t <= horizon]
        history.scale_downs = [(t, n) for t, n in history.scale_downs if now - t <= horizon]
