"""One replica proposal per metric of an HPA, and the largest of them
(upstream ``computeReplicasForMetrics`` and its ``computeStatusFor*Metric``).

Each ``spec.metrics[i]`` yields ``status.currentMetrics[i]`` (``{"type": ""}``
when it failed, as upstream's zero value) and a proposal:

==================  ======================================  ===========================
type / target       proposal                                failure reason
==================  ======================================  ===========================
Resource            utilization or average value of the      FailedGetResourceMetric
ContainerResource   pods' samples (metrics.k8s.io)           FailedGetContainerResourceMetric
Pods  AverageValue  per-pod average (custom.metrics.k8s.io)  FailedGetPodsMetric
Object Value        the object's value / target              FailedGetObjectMetric
Object AverageValue value / (target × replicas)              FailedGetObjectMetric
External Value      sum of values / target                   FailedGetExternalMetric
External AvgValue   sum / (target × replicas)                FailedGetExternalMetric
==================  ======================================  ===========================

A failed metric raises a Warning Event with its reason. If every metric
failed, or some did and the rest would scale down, the first failure becomes
``ScalingActive=False`` and nothing is proposed; otherwise
``ScalingActive=True`` (``ValidMetricFound``) names the metric that won.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from k8py.api.quantity import format_milli_quantity, quantity_milli_value
from k8py.api.selectors import label_selector_from_dict
from k8py.controllers.podautoscaler.metrics import MetricsSource
from k8py.controllers.podautoscaler.monitor import action_label
from k8py.controllers.podautoscaler.replicas import Calculator, MetricError

__all__ = ["Proposal", "propose", "go_label_selector"]

Warn = Callable[[str, str], None]
Observe = Callable[[str, str, str, float], None]


@dataclass
class Proposal:
    replicas: int | None  # None: no usable proposal (see condition)
    metric: str = ""  # what won, as upstream names it ("cpu resource utilization (percentage of request)")
    statuses: list[dict[str, Any]] = field(default_factory=list)
    condition: tuple[str, str, str] = ("True", "", "")  # ScalingActive status, reason, message
    error: str = ""
    error_label: str = "none"  # the first failure's kind for the controller's metrics: "spec", "internal" or "none"


class _Failed(Exception):
    def __init__(self, reason: str, inner: str, outer: str) -> None:
        super().__init__(outer)
        self.reason, self.inner, self.outer = reason, inner, outer

    @property
    def label(self) -> str:
        """``spec`` when the HPA asks for what cannot be (no target set, an unknown type), else ``internal``."""
        return "spec" if self.inner.startswith(("invalid ", "unknown metric source type")) else "internal"


def go_label_selector(selector: Mapping[str, Any] | None) -> str:
    """``%+v`` of a ``*metav1.LabelSelector`` (its generated ``String()``), as
    upstream puts it in an external metric's name."""
    if selector is None:
        return "nil"
    labels = "".join(f"{k}: {v}," for k, v in sorted((selector.get("matchLabels") or {}).items()))
    exprs = "".join(f"LabelSelectorRequirement{{Key:{e.get('key')},Operator:{e.get('operator')},"
                    f"Values:[{' '.join(e.get('values') or ())}],}},"
                    for e in selector.get("matchExpressions") or ())
    return (f"&LabelSelector{{MatchLabels:map[string]string{{{labels}}},"
            f"MatchExpressions:[]LabelSelectorRequirement{{{exprs}}},}}")


def _selector_text(selector: Mapping[str, Any] | None) -> str:
    return "" if selector is None else label_selector_from_dict(selector).to_string()


def _milli(value: Any) -> int | None:
    return None if value is None else quantity_milli_value(value)


class _Context:
    def __init__(self, namespace: str, selector: str, pods: list[Mapping[str, Any]], spec_replicas: int,
                 status_replicas: int, source: MetricsSource, calc: Calculator) -> None:
        self.namespace, self.selector, self.pods = namespace, selector, pods
        self.spec_replicas, self.status_replicas = spec_replicas, status_replicas
        self.source, self.calc = source, calc

    async def resource(self, body: Mapping[str, Any], container: str, kind: str) -> tuple[int, str, dict[str, Any]]:
        name, target = body.get("name") or "", body.get("target") or {}
        reason = "FailedGetContainerResourceMetric" if container else "FailedGetResourceMetric"
        outer = f"failed to get {name} container metric value" if container else f"failed to get {name} resource metric value"
        average = _milli(target.get("averageValue"))
        try:
            if average is not None:
                try:
                    samples = await self.source.resource_metric(self.namespace, self.selector, name, container)
                except MetricError as err:
                    raise MetricError(f"failed to get {name} usage: unable to get metrics for resource {name}: {err}") from None
                try:
                    replicas, usage = self.calc.plain_replicas(self.spec_replicas, average, self.pods, samples, resource=name)
                except MetricError as err:
                    raise MetricError(f"failed to get {name} usage: {err}") from None
                status = {"averageValue": format_milli_quantity(usage)}
                metric = f"{name} resource"
            elif target.get("averageUtilization") is not None:
                utilization = int(target["averageUtilization"])
                try:
                    samples = await self.source.resource_metric(self.namespace, self.selector, name, container)
                except MetricError as err:
                    raise MetricError(f"failed to get {name} utilization: unable to get metrics for resource {name}: {err}") from None
                try:
                    replicas, percent, raw = self.calc.resource_replicas(self.spec_replicas, utilization, name, self.pods, samples,
                                                                         container=container)
                except MetricError as err:
                    raise MetricError(f"failed to get {name} utilization: {err}") from None
                status = {"averageUtilization": percent, "averageValue": format_milli_quantity(raw)}
                metric = f"{name} resource utilization (percentage of request)"
            else:
                raise MetricError("invalid resource metric source: neither an average utilization target nor an average value "
                                  "(usage) target was set")
        except MetricError as err:
            raise _Failed(reason, str(err), f"{outer}: {err}") from None
        field_ = "containerResource" if container else "resource"
        described = {"name": name, **({"container": container} if container else {}), "current": status}
        return replicas, metric, {"type": kind, field_: described}

    async def pods_metric(self, body: Mapping[str, Any]) -> tuple[int, str, dict[str, Any]]:
        metric = body.get("metric") or {}
        name = metric.get("name") or ""
        target = _milli((body.get("target") or {}).get("averageValue")) or 0
        try:
            try:
                samples = await self.source.pods_metric(self.namespace, name, self.selector, _selector_text(metric.get("selector")))
            except MetricError as err:
                raise MetricError(f"unable to get metric {name}: {err}") from None
            replicas, usage = self.calc.plain_replicas(self.spec_replicas, target, self.pods, samples)
        except MetricError as err:
            raise _Failed("FailedGetPodsMetric", str(err), f"failed to get pods metric value: {err}") from None
        return replicas, f"pods metric {name}", {"type": "Pods", "pods": {"metric": dict(metric), "current": {
            "averageValue": format_milli_quantity(usage)}}}

    async def object_metric(self, body: Mapping[str, Any]) -> tuple[int, str, dict[str, Any]]:
        metric, ref = body.get("metric") or {}, body.get("describedObject") or {}
        name, target = metric.get("name") or "", body.get("target") or {}
        value, average = _milli(target.get("value")), _milli(target.get("averageValue"))
        try:
            if target.get("type") == "Value" and value is not None:
                usage = await self._object(name, ref, metric)
                replicas = self.calc.ratio_replicas(self.spec_replicas, usage / value if value else float("inf"), self.pods)
                current, label = {"value": format_milli_quantity(usage)}, f"{ref.get('kind')} metric {name}"
            elif target.get("type") == "AverageValue" and average is not None:
                try:
                    usage = await self._object(name, ref, metric)
                except MetricError as err:
                    raise MetricError(f"failed to get {name} object metric: {err}") from None
                replicas, per = self.calc.per_pod_replicas(self.status_replicas, average, usage)
                current, label = {"averageValue": format_milli_quantity(per)}, f"external metric {name}({go_label_selector(metric.get('selector'))})"
            else:
                raise MetricError("invalid object metric source: neither a value target nor an average value target was set")
        except MetricError as err:
            raise _Failed("FailedGetObjectMetric", str(err), f"failed to get object metric value: {err}") from None
        return replicas, label, {"type": "Object", "object": {"describedObject": dict(ref), "metric": dict(metric), "current": current}}

    async def _object(self, name: str, ref: Mapping[str, Any], metric: Mapping[str, Any]) -> int:
        try:
            return await self.source.object_metric(self.namespace, name, dict(ref), _selector_text(metric.get("selector")))
        except MetricError as err:
            raise MetricError(f"unable to get metric {name}: {ref.get('kind')} on {self.namespace} {ref.get('name')}/{err}") from None

    async def external_metric(self, body: Mapping[str, Any]) -> tuple[int, str, dict[str, Any]]:
        metric, target = body.get("metric") or {}, body.get("target") or {}
        name, selector = metric.get("name") or "", metric.get("selector")
        value, average = _milli(target.get("value")), _milli(target.get("averageValue"))
        label = f"external metric {name}({go_label_selector(selector)})"
        try:
            if average is not None:
                try:
                    usage = sum(await self._external(name, selector))
                except MetricError as err:
                    raise MetricError(f"failed to get {name} external metric: {err}") from None
                replicas, per = self.calc.per_pod_replicas(self.status_replicas, average, usage)
                current = {"averageValue": format_milli_quantity(per)}
            elif value is not None:
                try:
                    usage = sum(await self._external(name, selector))
                    replicas = self.calc.ratio_replicas(self.spec_replicas, usage / value if value else float("inf"), self.pods)
                except MetricError as err:
                    raise MetricError(f"failed to get external metric {name}: {err}") from None
                current = {"value": format_milli_quantity(usage)}
            else:
                raise MetricError("invalid external metric source: neither a value target nor an average value target was set")
        except MetricError as err:
            raise _Failed("FailedGetExternalMetric", str(err), f"failed to get external metric value: {err}") from None
        return replicas, label, {"type": "External", "external": {"metric": dict(metric), "current": current}}

    async def _external(self, name: str, selector: Mapping[str, Any] | None) -> list[int]:
        try:
            return await self.source.external_metric(self.namespace, name, _selector_text(selector))
        except MetricError as err:
            raise MetricError(f"unable to get external metric {self.namespace}/{name}/{go_label_selector(selector)}: {err}") from None

    async def one(self, spec: Mapping[str, Any]) -> tuple[int, str, dict[str, Any]]:
        kind = spec.get("type")
        if kind == "Resource":
            return await self.resource(spec.get("resource") or {}, "", "Resource")
        if kind == "ContainerResource":
            body = spec.get("containerResource") or {}
            return await self.resource(body, body.get("container") or "", "ContainerResource")
        if kind == "Pods":
            return await self.pods_metric(spec.get("pods") or {})
        if kind == "Object":
            return await self.object_metric(spec.get("object") or {})
        if kind == "External":
            return await self.external_metric(spec.get("external") or {})
        message = f"unknown metric source type {kind!r}"
        raise _Failed("InvalidMetricSourceType", message, message)


async def propose(metrics: list[Mapping[str, Any]], *, namespace: str, selector: str, pods: list[Mapping[str, Any]],
                  spec_replicas: int, status_replicas: int, source: MetricsSource, calc: Calculator, warn: Warn,
                  observe: Observe | None = None, timer: Callable[[], float] = time.monotonic) -> Proposal:
    """The largest proposal of ``metrics`` with the per-metric statuses (``computeReplicasForMetrics``);
    ``observe(action, error, metric_type, seconds)`` is told of each metric's computation."""
    ctx = _Context(namespace, selector, pods, spec_replicas, status_replicas, source, calc)
    out = Proposal(replicas=0)
    first: _Failed | None = None
    failures = 0
    for spec in metrics:
        started = timer()
        try:
            try:
                replicas, label, status = await ctx.one(spec)
            except _Failed:
                raise
            except Exception as err:  # an adapter that answers garbage: a failed metric, not a crash loop
                raise _Failed("FailedGetMetric", str(err), f"failed to get metric value: {err}") from None
        except _Failed as failed:
            warn(failed.reason, failed.inner)
            if observe is not None:
                observe("none", failed.label, str(spec.get("type") or ""), timer() - started)
            out.statuses.append({"type": ""})
            first = first or failed
            failures += 1
            continue
        if observe is not None:
            observe(action_label(spec_replicas, replicas), "none", str(spec.get("type") or ""), timer() - started)
        out.statuses.append(status)
        if not out.replicas or replicas > out.replicas:
            out.replicas, out.metric = replicas, label
    if first is not None:
        out.error_label = first.label
        out.error = f"invalid metrics ({failures} invalid out of {len(metrics)}), first error is: {first.outer}"
    if first is not None and (failures >= len(metrics) or (out.replicas or 0) < spec_replicas):
        out.replicas = None
        out.condition = ("False", first.reason, f"the HPA was unable to compute the replica count: {first.inner}")
        return out
    out.condition = ("True", "ValidMetricFound", f"the HPA was able to successfully calculate a replica count from {out.metric}")
    return out

