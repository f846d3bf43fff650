"""From a recommended replica count to the count that is written: upstream's
two normalizers, chosen by whether the HPA has a ``spec.behavior``.

- **With behavior** (``normalizeDesiredReplicasWithBehaviors``):
  *stabilization* — every recommendation is remembered with its time; scaling
  up, the *lowest* within ``scaleUp.stabilizationWindowSeconds`` (default 0)
  is used, scaling down the *highest* within
  ``scaleDown.stabilizationWindowSeconds`` (default: the controller manager's
  ``--horizontal-pod-autoscaler-downscale-stabilization``, 300 s). Then the
  *rate*: per policy, the count at the start of its ``periodSeconds`` is the
  current count minus the scale-ups plus the scale-downs made within it;
  ``Pods: v`` allows ±v from there, ``Percent: v`` up to
  ``ceil(start × (1 + v/100))`` or down to ``trunc(start × (1 − v/100))``;
  ``selectPolicy`` ``Max`` (default) takes the largest change, ``Min`` the
  smallest, ``Disabled`` none. Defaults as upstream: up 4 pods or 100% per
  15 s, down 100% per 15 s.
- **Without behavior** (``normalizeDesiredReplicas``; every autoscaling/v1
  object, and v2 ones that set none): scale-down stabilization only, over the
  flag's window, and a scale-up limited to ``max(2 × current, 4)`` per sync;
  no scale events are kept.

Both bound the result by ``[minReplicas, maxReplicas]`` and name what cut it
(the ``ScalingLimited`` condition's reason and message, and ``AbleToScale``'s
when stabilization changed it). Times are the controller clock's monotonic
seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

__all__ = ["Behavior", "History", "Normalized", "normalize"]

_DEFAULT_UP = {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
               "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15}, {"type": "Percent", "value": 100, "periodSeconds": 15}]}
_DEFAULT_DOWN = {"selectPolicy": "Max", "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}
_UP_STABILIZED = ("ScaleUpStabilized", "recent recommendations were lower than current one, applying the lowest recent recommendation")
_DOWN_STABILIZED = ("ScaleDownStabilized", "recent recommendations were higher than current one, applying the highest recent recommendation")
_READY = ("ReadyForNewScale", "recommended size matches current size")
_WITHIN = ("DesiredWithinRange", "the desired count is within the acceptable range")
_UP_LIMIT = ("ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate")
_TOO_MANY = ("TooManyReplicas", "the desired replica count is more than the maximum replica count")
_DOWN_LIMIT = ("ScaleDownLimit", "the desired replica count is decreasing faster than the maximum scale rate")
_TOO_FEW = ("TooFewReplicas", "the desired replica count is less than the minimum replica count")


@dataclass
class History:
    """What one HPA's normalizer remembers between syncs."""

    recommendations: list[tuple[float, int]] = field(default_factory=list)
    scale_ups: list[tuple[float, int]] = field(default_factory=list)
    scale_downs: list[tuple[float, int]] = field(default_factory=list)


@dataclass(frozen=True)
class Normalized:
    replicas: int
    able_to_scale: tuple[str, str]  # AbleToScale (True) reason, message
    limited: bool  # ScalingLimited status
    limit: tuple[str, str]  # its reason, message


def _remember(history: History, now: float, recommended: int, keep: float) -> None:
    """Record ``recommended``, reusing a slot older than ``keep`` (upstream overwrites one)."""
    for i, (t, _) in enumerate(history.recommendations):
        if now - t > keep:
            history.recommendations[i] = (now, recommended)
            break
    else:
        history.recommendations.append((now, recommended))
    history.recommendations = [(t, r) for t, r in history.recommendations if now - t <= keep]


class Behavior:
    def __init__(self, spec: Mapping[str, Any] | None, *, downscale_window: float = 300.0) -> None:
        """``downscale_window``: the scale-down window when the behavior sets none
        (``--horizontal-pod-autoscaler-downscale-stabilization``)."""
        spec = spec or {}
        self.up = {**_DEFAULT_UP, **(spec.get("scaleUp") or {})}
        self.down = {**_DEFAULT_DOWN, **(spec.get("scaleDown") or {})}
        if self.down.get("stabilizationWindowSeconds") is None:
            self.down["stabilizationWindowSeconds"] = downscale_window

    def stabilize(self, history: History, now: float, current: int, recommended: int) -> int:
        up_window = float(self.up.get("stabilizationWindowSeconds") or 0)
        down_window = float(self.down.get("stabilizationWindowSeconds") or 0)
        up_floor = min([r for t, r in history.recommendations if now - t < up_window] + [recommended])
        down_ceiling = max([r for t, r in history.recommendations if now - t < down_window] + [recommended])
        _remember(history, now, recommended, max(up_window, down_window))
        return min(max(current, up_floor), down_ceiling)

    @staticmethod
    def _changed(events: list[tuple[float, int]], now: float, period: float) -> int:
        return sum(n for t, n in events if now - t < period)

    def up_limit(self, history: History, now: float, current: int) -> int:
        """``calculateScaleUpLimitWithScalingRules``, never below ``current``."""
        select = self.up.get("selectPolicy") or "Max"
        if select == "Disabled":
            return current
        proposals = []
        for policy in self.up.get("policies") or ():
            period = float(policy.get("periodSeconds") or 15)
            start = current - self._changed(history.scale_ups, now, period) + self._changed(history.scale_downs, now, period)
            value = int(policy.get("value") or 0)
            proposals.append(start + value if policy.get("type") == "Pods" else math.ceil(start * (1 + value / 100)))
        if not proposals:
            return current
        return max(current, min(proposals) if select == "Min" else max(proposals))

    def down_limit(self, history: History, now: float, current: int) -> int:
        """``calculateScaleDownLimitWithBehaviors``, never above ``current``."""
        select = self.down.get("selectPolicy") or "Max"
        if select == "Disabled":
            return current
        proposals = []
        for policy in self.down.get("policies") or ():
            period = float(policy.get("periodSeconds") or 15)
            start = current - self._changed(history.scale_ups, now, period) + self._changed(history.scale_downs, now, period)
            value = int(policy.get("value") or 0)
            proposals.append(start - value if policy.get("type") == "Pods" else int(start * (1 - value / 100)))
        if not proposals:
            return current
        return min(current, max(proposals) if select == "Min" else min(proposals))

    def bounded(self, history: History, now: float, current: int, desired: int, low: int, high: int) -> tuple[int, str, str]:
        """``desired`` within the rate limits and ``[low, high]`` (``convertDesiredReplicasWithBehaviorRate``)."""
        if desired > current:
            up = self.up_limit(history, now, current)
            allowed, why = (up, _UP_LIMIT) if high > up else (high, _TOO_MANY)
            if desired > allowed:
                return allowed, *why
        elif desired < current:
            down = self.down_limit(history, now, current)
            allowed, why = (down, _DOWN_LIMIT) if low < down else (low, _TOO_FEW)
            if desired < allowed:
                return allowed, *why
        return desired, *_WITHIN

    @staticmethod
    def record(history: History, now: float, old: int, new: int) -> None:
        """A scale event (``storeScaleEvent``), kept for the longest policy period."""
        if new > old:
            history.scale_ups.append((now, new - old))
        elif new < old:
            history.scale_downs.append((now, old - new))
        horizon = 1800.0  # validation caps periodSeconds at 1800
        history.scale_ups = [(t, n) for t, n in history.scale_ups if now - t <= horizon]
        history.scale_downs = [(t, n) for t, n in history.scale_downs if now - t <= horizon]


def _legacy(history: History, now: float, current: int, recommended: int, low: int, high: int,
            downscale_window: float) -> Normalized:
    """``normalizeDesiredReplicas`` with ``stabilizeRecommendation`` and
    ``convertDesiredReplicasWithRules``."""
    stabilized = max([r for t, r in history.recommendations if now - t <= downscale_window] + [recommended])
    _remember(history, now, recommended, downscale_window)
    able = _DOWN_STABILIZED if stabilized != recommended else _READY
    scale_up_limit = int(max(2.0 * current, 4.0))
    maximum, why = (scale_up_limit, _UP_LIMIT) if high > scale_up_limit else (high, _TOO_MANY)
    if stabilized < low:
        desired, why = low, _TOO_FEW
    elif stabilized > maximum:
        desired = maximum
    else:
        desired, why = stabilized, _WITHIN
    return Normalized(desired, able, desired != stabilized, why)


def normalize(spec: Mapping[str, Any], history: History, now: float, current: int, recommended: int, *,
              downscale_window: float) -> Normalized:
    """The count to write for ``recommended``, by the HPA's ``spec.behavior`` or, without one, the older rules."""
    low, high = int(spec.get("minReplicas") or 1), int(spec.get("maxReplicas") or 1)
    if spec.get("behavior") is None:
        return _legacy(history, now, current, recommended, low, high, downscale_window)
    behavior = Behavior(spec.get("behavior"), downscale_window=downscale_window)
    stabilized = behavior.stabilize(history, now, current, recommended)
    able = _READY if stabilized == recommended else (_UP_STABILIZED if recommended >= current else _DOWN_STABILIZED)
    desired, reason, message = behavior.bounded(history, now, current, stabilized, low, high)
    return Normalized(desired, able, desired != stabilized, (reason, message))
