"""The HPA's replica calculation (upstream ``podautoscaler/replica_calculator.go``),
as pure functions over pods and their measured samples.

All arithmetic is upstream's: values are integer *thousandths*
(``Quantity.MilliValue``), utilization is a truncated integer percentage and
the ratio is computed from it, so a figure here is the figure upstream prints.

Pods the target's scale selects are grouped as ``groupPods`` does:

- being deleted or Failed: **ignored** (left out entirely);
- Pending: **unready**;
- no sample: **missing**;
- for cpu only, a sampled pod is **unready** too when it has no Ready
  condition or start time; within ``cpu_initialization_period`` (300 s) of its
  start when it is not Ready, or when its sample is older than its last
  readiness change plus the sample's window (the sample may predate
  readiness: a starting JVM burns cpu before it serves); past that period only
  when it is not Ready and has never been Ready (its Ready condition last
  changed within ``initial_readiness_delay``, 30 s, of its start);
- the rest are **ready**.

Then, with the unready and ignored samples dropped: ``ratio =
utilization / target``. With no missing pods, and no unready ones while scaling
up, the count is ``ceil(ratio × ready)`` unless within ``tolerance`` (0.1) of 1.
Otherwise upstream rebalances: scaling down, missing pods are assumed at
``max(100%, target)`` of their request; scaling up, missing and unready pods at
0; if the new ratio is within tolerance or flips direction the current count
is kept, else ``ceil(new ratio × counted pods)`` (also kept when that moves the
wrong way).

Plain metrics (Resource ``AverageValue``, Pods) use the same grouping and
rebalancing on per-pod averages (missing pods assumed at the target when
scaling down); Object and External metrics are one value (or a sum) over the
target (``Value``) or per replica (``AverageValue``).

Errors are :class:`MetricError` carrying upstream's message.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from k8py.api.quantity import quantity_milli_value
from k8py.controllers.pod_status import parse_time

__all__ = ["PodMetric", "MetricError", "Calculator", "TOLERANCE"]

TOLERANCE = 0.1


class MetricError(Exception):
    pass


@dataclass(frozen=True)
class PodMetric:
    """One pod's sample: ``value`` in thousandths, ``timestamp`` in seconds since
    the epoch, ``window`` the seconds it covers."""

    value: int
    timestamp: float = 0.0
    window: float = 60.0


def _div(a: int, b: int) -> int:
    """Go's integer division (truncated toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _ready(pod: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in (pod.get("status") or {}).get("conditions") or ())


def _name(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("name") or "")


def _requests(pods: list[Mapping[str, Any]], resource: str, container: str) -> dict[str, int]:
    """Per pod, the summed request of ``resource`` over its containers and
    restartable init containers (sidecars), in thousandths (``calculatePodRequests``)."""
    out: dict[str, int] = {}
    for pod in pods:
        spec = pod.get("spec") or {}
        containers = list(spec.get("containers") or ()) + [
            c for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"]
        total = 0
        for c in containers:
            if container and c.get("name") != container:
                continue
            value = ((c.get("resources") or {}).get("requests") or {}).get(resource)
            if value is None:
                raise MetricError(f"missing request for {resource} in container {c.get('name')} of Pod {_name(pod)}")
            total += quantity_milli_value(value)
        out[_name(pod)] = total
    return out


@dataclass(frozen=True)
class Calculator:
    """``now`` in seconds since the epoch; the three knobs are the controller
    manager's ``--horizontal-pod-autoscaler-{tolerance,cpu-initialization-period,
    initial-readiness-delay}``."""

    now: float
    tolerance: float = TOLERANCE
    cpu_initialization_period: float = 300.0
    initial_readiness_delay: float = 30.0

    def _within(self, ratio: float) -> bool:
        return abs(1.0 - ratio) <= self.tolerance

    def _cpu_unready(self, pod: Mapping[str, Any], sample: PodMetric) -> bool:
        status = pod.get("status") or {}
        condition = next((c for c in status.get("conditions") or () if c.get("type") == "Ready"), None)
        started = parse_time(status.get("startTime"))
        if condition is None or started is None:
            return True
        changed = parse_time(condition.get("lastTransitionTime"))
        changed_at = changed.timestamp() if changed is not None else 0.0
        start = started.timestamp()
        if start + self.cpu_initialization_period > self.now:
            return condition.get("status") == "False" or sample.timestamp < changed_at + sample.window
        return condition.get("status") == "False" and start + self.initial_readiness_delay > changed_at

    def group(self, pods: list[Mapping[str, Any]], metrics: Mapping[str, PodMetric],
              resource: str) -> tuple[int, set[str], set[str], set[str]]:
        """``(ready count, unready, missing, ignored)`` names (``groupPods``)."""
        ready, unready, missing, ignored = 0, set(), set(), set()
        for pod in pods:
            meta, status = pod.get("metadata") or {}, pod.get("status") or {}
            name = _name(pod)
            if meta.get("deletionTimestamp") or status.get("phase") == "Failed":
                ignored.add(name)
            elif status.get("phase") == "Pending":
                unready.add(name)
            elif name not in metrics:
                missing.add(name)
            elif resource == "cpu" and self._cpu_unready(pod, metrics[name]):
                unready.add(name)
            else:
                ready += 1
        return ready, unready, missing, ignored

    # -- Resource, Utilization target -------------------------------------------------

    def resource_replicas(self, current: int, target_utilization: int, resource: str, pods: list[Mapping[str, Any]],
                          metrics: Mapping[str, PodMetric], *, container: str = "") -> tuple[int, int, int]:
        """``(replicas, utilization %, average usage in thousandths)`` (``GetResourceReplicas``)."""
        if not pods:
            raise MetricError("no pods returned by selector while calculating replica count")
        ready, unready, missing, ignored = self.group(pods, metrics, resource)
        values = {n: m.value for n, m in metrics.items() if n not in unready and n not in ignored}
        if not values:
            raise MetricError("did not receive metrics for targeted pods (pods might be unready)")
        requests = _requests(pods, resource, container)
        ratio, utilization, raw = _utilization_ratio(values, requests, target_utilization)
        scale_up_with_unready = bool(unready) and ratio > 1.0
        if not scale_up_with_unready and not missing:
            if self._within(ratio):
                return current, utilization, raw
            return math.ceil(ratio * ready), utilization, raw
        if missing:
            if ratio < 1.0:
                fallback = max(100, target_utilization)
                for name in missing:
                    values[name] = _div(requests[name] * fallback, 100)
            elif ratio > 1.0:
                for name in missing:
                    values[name] = 0
        if scale_up_with_unready:
            for name in unready:
                values[name] = 0
        new_ratio, _, _ = _utilization_ratio(values, requests, target_utilization)
        return self._rebalanced(current, ratio, new_ratio, len(values)), utilization, raw

    def _rebalanced(self, current: int, ratio: float, new_ratio: float, counted: int) -> int:
        if self._within(new_ratio) or (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio):
            return current
        replicas = math.ceil(new_ratio * counted)
        if (new_ratio < 1.0 and replicas > current) or (new_ratio > 1.0 and replicas < current):
            return current
        return replicas

    # -- Resource AverageValue and Pods metrics ----------------------------------------

    def plain_replicas(self, current: int, target: int, pods: list[Mapping[str, Any]], metrics: Mapping[str, PodMetric],
                       *, resource: str = "") -> tuple[int, int]:
        """``(replicas, average per pod in thousandths)`` (``calcPlainMetricReplicas``);
        ``resource`` is set for a Resource metric (cpu readiness rules apply)."""
        if not pods:
            raise MetricError("no pods returned by selector while calculating replica count")
        ready, unready, missing, ignored = self.group(pods, metrics, resource)
        values = {n: m.value for n, m in metrics.items() if n not in unready and n not in ignored}
        if not values:
            raise MetricError("did not receive metrics for targeted pods (pods might be unready)")
        ratio, usage = _usage_ratio(values, target)
        scale_up_with_unready = bool(unready) and ratio > 1.0
        if not scale_up_with_unready and not missing:
            if self._within(ratio):
                return current, usage
            return math.ceil(ratio * ready), usage
        if missing:
            if ratio < 1.0:
                for name in missing:
                    values[name] = target
            elif ratio > 1.0:
                for name in missing:
                    values[name] = 0
        if scale_up_with_unready:
            for name in unready:
                values[name] = 0
        new_ratio, _ = _usage_ratio(values, target)
        if self._within(new_ratio) or (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio):
            return current, usage
        replicas = math.ceil(new_ratio * len(values))
        if (new_ratio < 1.0 and replicas > current) or (new_ratio > 1.0 and replicas < current):
            return current, usage
        return replicas, usage

    # -- Object and External metrics ----------------------------------------------------

    def ratio_replicas(self, current: int, ratio: float, pods: list[Mapping[str, Any]]) -> int:
        """``getUsageRatioReplicaCount``: at 0 replicas ``ceil(ratio)`` (scale from
        zero); else the current count within tolerance, or ``ceil(ratio × ready
        running pods)``."""
        if current == 0:
            return math.ceil(ratio)
        if self._within(ratio):
            return current
        if not pods:
            raise MetricError("unable to calculate ready pods: no pods returned by selector while calculating replica count")
        ready = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Running" and _ready(p))
        return math.ceil(ratio * ready)

    def per_pod_replicas(self, status_replicas: int, target_average: int, usage: int) -> tuple[int, int]:
        """``GetObjectPerPodMetricReplicas`` / ``GetExternalPerPodMetricReplicas``:
        ``(replicas, usage per replica)``."""
        replicas = status_replicas
        if status_replicas == 0 or target_average == 0:
            ratio = math.inf
        else:
            ratio = usage / (target_average * status_replicas)
        if not self._within(ratio):
            replicas = math.ceil(usage / target_average) if target_average else status_replicas
        per_replica = math.ceil(usage / status_replicas) if status_replicas else usage
        return replicas, per_replica


def _utilization_ratio(values: Mapping[str, int], requests: Mapping[str, int], target: int) -> tuple[float, int, int]:
    """``GetResourceUtilizationRatio``: ``(ratio, utilization %, average usage)``."""
    used = asked = 0
    for name, value in values.items():
        if name in requests:
            used += value
            asked += requests[name]
    if asked == 0:
        raise MetricError("no metrics returned matched known pods")
    utilization = _div(used * 100, asked)
    return utilization / target, utilization, _div(used, len(values))


def _usage_ratio(values: Mapping[str, int], target: int) -> tuple[float, int]:
    """``GetMetricUsageRatio``: ``(average / target, average)``."""
    usage = _div(sum(values.values()), len(values))
    return (usage / target if target else math.inf), usage
