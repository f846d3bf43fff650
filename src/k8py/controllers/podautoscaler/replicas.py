"""The HPA's replica calculation (upstream ``podautoscaler/replica_calculator.go``),
as pure functions over pods and their measured usage.

For a Resource metric with a ``Utilization`` target, over the pods the
target's scale selects (pods being deleted or Failed left out):

- pods being deleted or Failed are left out; Pending pods are "unready";
  pods with no measurement are "missing"; for cpu (only), a measured pod is
  "unready" too when it has no Ready condition or start time, when it is
  within ``cpu_initialization_period`` (300 s) of its start and not Ready,
  or when it is not Ready and never has been since its start (its Ready
  condition last changed within ``initial_readiness_delay``, 30 s, of the
  start) — upstream's ``groupPods``, except that upstream also ignores a
  sample taken within one metric window of a Ready transition during the
  initialization period (the metrics source here gives no sample times);
  the rest count ("ready");
- ``ratio = (Σ usage / Σ requests of the ready pods) / target``; every pod
  must request the resource, or the metric fails ("missing request for cpu");
- with nothing ignored or missing: within ``tolerance`` (0.1) of 1 keeps the
  current count, else ``ceil(ratio × ready)``;
- otherwise upstream's rebalancing: scaling down, missing pods are assumed at
  100% of their request; scaling up, missing and ignored pods at 0; the ratio
  is recomputed and, if it is within tolerance or flips direction, the
  current count is kept, else ``ceil(new ratio × measured pods)``.

An ``AverageValue`` target divides the summed usage by the target
(``ceil(Σ usage / target)``) with the same tolerance on the ratio.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Mapping

from k8py.api.quantity import parse_quantity
from k8py.controllers.pod_status import parse_time

__all__ = ["Proposal", "MetricError", "Readiness", "utilization_replicas", "average_value_replicas", "TOLERANCE"]

TOLERANCE = 0.1


class MetricError(Exception):
    pass


@dataclass(frozen=True)
class Proposal:
    replicas: int
    utilization: int | None  # percent of request, for status.currentMetrics
    average: Fraction  # average usage per measured pod


def _ready(pod: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in (pod.get("status") or {}).get("conditions") or ())


def _request(pod: Mapping[str, Any], resource: str) -> Fraction | None:
    total = Fraction(0)
    for c in (pod.get("spec") or {}).get("containers") or ():
        value = ((c.get("resources") or {}).get("requests") or {}).get(resource)
        if value is None:
            return None
        total += parse_quantity(value)
    return total


@dataclass(frozen=True)
class Readiness:
    """When a measured pod's cpu counts (``--horizontal-pod-autoscaler-cpu-initialization-period``,
    ``--horizontal-pod-autoscaler-initial-readiness-delay``); ``now`` in seconds since the epoch."""

    now: float
    cpu_initialization_period: float = 300.0
    initial_readiness_delay: float = 30.0


def _cpu_unready(pod: Mapping[str, Any], readiness: Readiness) -> bool:
    status = pod.get("status") or {}
    condition = next((c for c in status.get("conditions") or () if c.get("type") == "Ready"), None)
    started = parse_time(status.get("startTime"))
    if condition is None or started is None:
        return True
    start = started.timestamp()
    if start + readiness.cpu_initialization_period > readiness.now:
        return condition.get("status") == "False"
    changed = parse_time(condition.get("lastTransitionTime"))
    never_ready = changed is not None and start + readiness.initial_readiness_delay > changed.timestamp()
    return condition.get("status") == "False" and never_ready


def _groups(pods: list[Mapping[str, Any]], usage: Mapping[str, Fraction], resource: str,
            readiness: Readiness | None) -> tuple[list[Any], list[Any], list[Any]]:
    ready, unready, missing = [], [], []
    for pod in pods:
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        if meta.get("deletionTimestamp") or status.get("phase") == "Failed":
            continue
        if status.get("phase") == "Pending":
            unready.append(pod)
        elif meta.get("name") not in usage:
            missing.append(pod)
        elif resource == "cpu" and (_cpu_unready(pod, readiness) if readiness is not None else not _ready(pod)):
            unready.append(pod)
        else:
            ready.append(pod)
    return ready, unready, missing


def utilization_replicas(current: int, target_percent: int, resource: str, pods: list[Mapping[str, Any]],
                         usage: Mapping[str, Fraction], *, tolerance: float = TOLERANCE,
                         readiness: Readiness | None = None) -> Proposal:
    """``readiness`` None: a cpu pod counts iff it is Ready (tests of the arithmetic)."""
    if not pods:
        raise MetricError("no pods returned by selector while calculating replica count")
    ready, ignored, missing = _groups(pods, usage, resource, readiness)
    requests: dict[str, Fraction] = {}
    for pod in ready + ignored + missing:
        req = _request(pod, resource)
        if req is None or req == 0:
            raise MetricError(f"missing request for {resource} in container of Pod {pod['metadata']['name']}")
        requests[pod["metadata"]["name"]] = req
    if not ready:
        raise MetricError(f"did not receive metrics for targeted pods (pods might be unready)")
    used = sum((usage[p["metadata"]["name"]] for p in ready), Fraction(0))
    asked = sum((requests[p["metadata"]["name"]] for p in ready), Fraction(0))
    utilization = int(used * 100 / asked)
    ratio = float(used * 100 / asked) / target_percent
    average = used / len(ready)
    if not ignored and not missing:
        if abs(ratio - 1.0) <= tolerance:
            return Proposal(current, utilization, average)
        return Proposal(math.ceil(ratio * len(ready)), utilization, average)
    if ratio < 1.0:
        used += sum((requests[p["metadata"]["name"]] for p in missing), Fraction(0))
        asked += sum((requests[p["metadata"]["name"]] for p in missing), Fraction(0))
        counted = len(ready) + len(missing)
    else:
        extra = missing + ignored
        asked += sum((requests[p["metadata"]["name"]] for p in extra), Fraction(0))
        counted = len(ready) + len(extra)
    new_ratio = float(used * 100 / asked) / target_percent
    if abs(new_ratio - 1.0) <= tolerance or (ratio < 1.0) != (new_ratio < 1.0):
        return Proposal(current, utilization, average)
    replicas = math.ceil(new_ratio * counted)
    if (ratio < 1.0 and replicas > current) or (ratio > 1.0 and replicas < current):
        return Proposal(current, utilization, average)
    return Proposal(replicas, utilization, average)


def average_value_replicas(current: int, target: Fraction, pods: list[Mapping[str, Any]], usage: Mapping[str, Fraction],
                           *, tolerance: float = TOLERANCE, resource: str = "", readiness: Readiness | None = None) -> Proposal:
    ready, ignored, missing = _groups(pods, usage, resource, readiness)
    measured = ready + ignored
    if not measured:
        raise MetricError("did not receive metrics for targeted pods (pods might be unready)")
    used = sum((usage[p["metadata"]["name"]] for p in measured), Fraction(0))
    average = used / len(measured)
    ratio = float(used / (target * max(current, 1)))
    if current and abs(ratio - 1.0) <= tolerance:
        return Proposal(current, None, average)
    return Proposal(math.ceil(float(used / target)), None, average)
