"""The horizontal pod autoscaler (``horizontalpodautoscaling``; upstream
``pkg/controller/podautoscaler``).

Every ``hpa_sync_period`` seconds (``options.extra``, upstream's
``--horizontal-pod-autoscaler-sync-period`` 15 s) and on each HPA change:

1. read the target's ``scale`` subresource (replicas and selector) through
   ``spec.scaleTargetRef``: the built-in workloads directly, any other kind
   (a custom resource with a scale subresource) found by discovery from the
   reference's ``apiVersion`` and ``kind``, as upstream's scale client does;
2. a target at 0 replicas is left alone (``ScalingActive=False``,
   ``ScalingDisabled``); otherwise each Resource metric (cpu, memory;
   ``Utilization`` or ``AverageValue``) proposes a count (``replicas``), and
   the largest wins; a metric that cannot be computed sets
   ``ScalingActive=False`` (``FailedGetResourceMetric``) and, if none could,
   nothing is scaled;
3. the proposal is stabilized (``AbleToScale`` ``ScaleUpStabilized`` /
   ``ScaleDownStabilized`` when that changed it) and rate-limited within
   ``[minReplicas, maxReplicas]`` (``ScalingLimited`` True with
   ``ScaleUpLimit``, ``ScaleDownLimit``, ``TooManyReplicas`` or
   ``TooFewReplicas`` when a bound cut it), upstream's
   ``normalizeDesiredReplicasWithBehaviors``; a target already outside the
   bounds goes straight to the nearest one;
4. a new count is written to the scale subresource with a
   ``SuccessfulRescale`` Event ("New size: N; reason: …"), and the status
   (current/desired replicas, currentMetrics, lastScaleTime, conditions) is
   written.

Metrics come from a :class:`~.metrics.MetricsSource` (``metrics.k8s.io`` by
default; tests may inject another).
"""

from __future__ import annotations

import logging
from fractions import Fraction
from typing import Any

from k8py.api.errors import NotFound, StatusError
from k8py.api.quantity import parse_quantity
from k8py.api.quota import format_amount
from k8py.api.selectors import parse_label_selector
from k8py.client.keys import split_key
from k8py.client.resource import Resource
from k8py.client.resources import (DEPLOYMENTS, HORIZONTAL_POD_AUTOSCALERS, PODS, REPLICASETS, REPLICATION_CONTROLLERS,
                                   STATEFULSETS)
from k8py.client.rest import PatchType
from k8py.controllers.context import ControllerContext
from k8py.controllers.keyed_controller import KeyedController
from k8py.controllers.pod_status import format_time
from k8py.controllers.podautoscaler.behavior import Behavior, History
from k8py.controllers.podautoscaler.metrics import MetricsSource, ResourceMetricsClient
from k8py.controllers.podautoscaler.replicas import MetricError, Readiness, average_value_replicas, utilization_replicas

__all__ = ["HorizontalController"]

logger = logging.getLogger(__name__)

_TARGETS = {"Deployment": DEPLOYMENTS, "ReplicaSet": REPLICASETS, "StatefulSet": STATEFULSETS,
            "ReplicationController": REPLICATION_CONTROLLERS}


class HorizontalController(KeyedController):
    def __init__(self, ctx: ControllerContext, metrics: MetricsSource | None = None) -> None:
        super().__init__(ctx, name="horizontalpodautoscaling", queue_name="horizontalpodautoscaler")
        self.recorder = ctx.recorder("horizontal-pod-autoscaler")
        self.hpas = ctx.informers.informer(HORIZONTAL_POD_AUTOSCALERS)
        self.pods = ctx.informers.informer(PODS)
        self.wait_for(self.hpas, self.pods)
        self.metrics: MetricsSource = metrics or ctx.options.extra.get("hpa_metrics") or ResourceMetricsClient(ctx.client)
        self.sync_period = float(ctx.options.extra.get("hpa_sync_period", 15.0))
        self.tolerance = float(ctx.options.extra.get("hpa_tolerance", 0.1))
        self.downscale_window = float(ctx.options.extra.get("hpa_downscale_stabilization", 300.0))
        self.cpu_initialization_period = float(ctx.options.extra.get("hpa_cpu_initialization_period", 300.0))
        self.initial_readiness_delay = float(ctx.options.extra.get("hpa_initial_readiness_delay", 30.0))
        self.history: dict[str, History] = {}
        self.hpas.add_event_handler(on_add=self.enqueue, on_update=self._changed, on_delete=self._deleted)

    def _changed(self, old: Any, new: Any) -> None:
        if old.get("spec") != new.get("spec"):  # our own status writes do not re-run the sync
            self.enqueue(new)

    def _deleted(self, obj: Any) -> None:
        meta = (getattr(obj, "obj", obj) or {}).get("metadata") or {}
        self.history.pop(f"{meta.get('namespace')}/{meta.get('name')}", None)

    async def sync(self, key: str) -> float | None:
        namespace, name = split_key(key)
        hpa = self.hpas.lister.try_get(namespace, name)
        if hpa is None:
            return None
        spec = hpa.get("spec") or {}
        ref = spec.get("scaleTargetRef") or {}
        conditions: dict[str, tuple[str, str, str]] = {}
        try:
            resource = await self._target(ref)
            scale = await self.client.get(resource, namespace, ref.get("name") or "", subresource="scale")
        except StatusError as err:
            message = f"the HPA controller was unable to get the target's current scale: {err.message}"
            conditions["AbleToScale"] = ("False", "FailedGetScale", message)
            self.recorder.event(hpa, "Warning", "FailedGetScale", err.message, resource=HORIZONTAL_POD_AUTOSCALERS)
            await self._write_status(hpa, None, None, [], conditions, scaled=False)
            return self.sync_period
        current = int((scale.get("spec") or {}).get("replicas") or 0)
        selector = (scale.get("status") or {}).get("selector") or ""
        low, high = int(spec.get("minReplicas") or 1), int(spec.get("maxReplicas") or 1)
        metrics_status: list[dict[str, Any]] = []
        if current == 0 and low != 0:
            conditions["ScalingActive"] = ("False", "ScalingDisabled", "scaling is disabled since the replica count of the target is zero")
            await self._write_status(hpa, current, current, metrics_status, conditions, scaled=False)
            return self.sync_period
        now = self.clock.monotonic()
        history = self.history.setdefault(key, History())
        behavior = Behavior(spec.get("behavior"), downscale_window=self.downscale_window)
        if current > high:  # upstream: straight to the bounds, metrics or not
            desired, why = high, "Current number of replicas above Spec.MaxReplicas"
        elif current < low:
            desired, why = low, "Current number of replicas below Spec.MinReplicas"
        else:
            proposal, reason = await self._propose(hpa, namespace, selector, current, metrics_status, conditions)
            if proposal is None:
                await self._write_status(hpa, current, current, metrics_status, conditions, scaled=False)
                return self.sync_period
            stabilized = behavior.stabilize(history, now, current, proposal)
            if stabilized != proposal:
                conditions["AbleToScale"] = (("True", "ScaleUpStabilized", "recent recommendations were lower than current one, "
                                              "applying the lowest recent recommendation") if proposal >= current else
                                             ("True", "ScaleDownStabilized", "recent recommendations were higher than current one, "
                                              "applying the highest recent recommendation"))
            else:
                conditions["AbleToScale"] = ("True", "ReadyForNewScale", "recommended size matches current size")
            desired, limit_reason, limit_message = behavior.bounded(history, now, current, stabilized, low, high)
            conditions["ScalingLimited"] = ("False" if desired == stabilized else "True", limit_reason, limit_message)
            why = reason if desired > current else "All metrics below target"
        scaled = desired != current
        if scaled:
            await self.client.patch(resource, namespace, ref["name"], {"spec": {"replicas": desired}},
                                    patch_type=PatchType.MERGE, subresource="scale")
            behavior.record(history, now, current, desired)
            self.recorder.eventf(hpa, "Normal", "SuccessfulRescale", "New size: %d; reason: %s", desired, why,
                                 resource=HORIZONTAL_POD_AUTOSCALERS)
            conditions["AbleToScale"] = ("True", "SucceededRescale", f"the HPA controller was able to update the target scale to {desired}")
        await self._write_status(hpa, current, desired, metrics_status, conditions, scaled=scaled)
        return self.sync_period

    async def _target(self, ref: dict[str, Any]) -> Resource:
        """The resource ``scaleTargetRef`` names (raises NotFound as upstream's RESTMapper)."""
        kind = ref.get("kind") or ""
        group, _, version = (ref.get("apiVersion") or "").rpartition("/")
        builtin = _TARGETS.get(kind)
        if builtin is not None and (not ref.get("apiVersion") or builtin.group == group):
            return builtin
        try:
            found = await self.client.discovery.resource_for(kind, group=group)
        except NotFound:
            raise NotFound(f'no matches for kind "{kind}" in group "{group}"') from None
        if found.kind != kind:  # discovery also matches plurals and short names; a reference names the kind
            raise NotFound(f'no matches for kind "{kind}" in group "{group}"')
        return Resource(found.group, version or found.version, found.plural, found.namespaced, found.kind)

    async def _propose(self, hpa: Any, namespace: str, selector: str, current: int, metrics_status: list[dict[str, Any]],
                       conditions: dict[str, tuple[str, str, str]]) -> tuple[int | None, str]:
        match = parse_label_selector(selector)
        pods = [p for p in self.pods.lister.list(namespace=namespace) if match.matches((p.get("metadata") or {}).get("labels") or {})]
        best: int | None = None
        best_reason = ""
        errors = []
        readiness = Readiness(self.clock.now().timestamp(), self.cpu_initialization_period, self.initial_readiness_delay)
        for metric in (hpa.get("spec") or {}).get("metrics") or ():
            if metric.get("type") != "Resource":
                errors.append(f"metric type {metric.get('type')} is not supported")
                continue
            res = metric.get("resource") or {}
            name, target = res.get("name") or "", res.get("target") or {}
            try:
                usage = await self.metrics.pod_usage(namespace, selector, name)
                if not usage:
                    raise MetricError(f"unable to get metrics for resource {name}: no metrics returned from resource metrics API")
                if target.get("type") == "Utilization":
                    p = utilization_replicas(current, int(target.get("averageUtilization") or 0), name, pods, usage, tolerance=self.tolerance,
                                             readiness=readiness)
                    metrics_status.append({"type": "Resource", "resource": {"name": name, "current": {
                        "averageUtilization": p.utilization, "averageValue": format_amount(name, p.average)}}})
                    why = f"{name} resource utilization (percentage of request) above target"
                else:
                    p = average_value_replicas(current, parse_quantity(target.get("averageValue") or "0"), pods, usage, tolerance=self.tolerance,
                                               resource=name, readiness=readiness)
                    metrics_status.append({"type": "Resource", "resource": {"name": name, "current": {"averageValue": format_amount(name, p.average)}}})
                    why = f"{name} resource above target"
            except MetricError as err:
                errors.append(f"failed to get {name} utilization: {err}")
                continue
            except Exception as err:  # the metrics API may be down: a condition, not a crash loop
                errors.append(f"failed to get {name} utilization: unable to get metrics for resource {name}: {err}")
                continue
            if best is None or p.replicas > best:
                best, best_reason = p.replicas, why
        if errors and best is None:
            conditions["ScalingActive"] = ("False", "FailedGetResourceMetric", "the HPA was unable to compute the replica count: " + "; ".join(errors))
            self.recorder.event(hpa, "Warning", "FailedGetResourceMetric", "; ".join(errors), resource=HORIZONTAL_POD_AUTOSCALERS)
        elif best is not None:
            conditions["ScalingActive"] = ("True", "ValidMetricFound",
                                           "the HPA was able to successfully calculate a replica count from " + best_reason.replace(" above target", ""))
        return best, best_reason

    async def _write_status(self, hpa: Any, current: int | None, desired: int | None, metrics: list[dict[str, Any]],
                            conditions: dict[str, tuple[str, str, str]], *, scaled: bool) -> None:
        old = hpa.get("status") or {}
        now = format_time(self.clock.now())
        old_conds = {c.get("type"): c for c in old.get("conditions") or ()}
        conds = []
        for ctype in ("AbleToScale", "ScalingActive", "ScalingLimited"):
            if ctype not in conditions:
                if ctype in old_conds:
                    conds.append(old_conds[ctype])
                continue
            status, reason, message = conditions[ctype]
            prev = old_conds.get(ctype)
            since = prev.get("lastTransitionTime") if prev and prev.get("status") == status else now
            conds.append({"type": ctype, "status": status, "lastTransitionTime": since, "reason": reason, "message": message})
        status: dict[str, Any] = {"observedGeneration": hpa["metadata"].get("generation"),
                                  "currentReplicas": current if current is not None else old.get("currentReplicas", 0),
                                  "desiredReplicas": desired if desired is not None else old.get("desiredReplicas", 0),
                                  "conditions": conds}
        if metrics:
            status["currentMetrics"] = metrics
        last = now if scaled else old.get("lastScaleTime")
        if last:
            status["lastScaleTime"] = last
        if status == old:
            return
        await self.client.update(HORIZONTAL_POD_AUTOSCALERS, dict(hpa, status=status), subresource="status")
