"""The horizontal pod autoscaler (``horizontalpodautoscaling``; upstream
``pkg/controller/podautoscaler``).

Every ``hpa_sync_period`` seconds (``options.extra``, upstream's
``--horizontal-pod-autoscaler-sync-period`` 15 s) and on each HPA change:

1. read the target's ``scale`` subresource (replicas and selector) through
   ``spec.scaleTargetRef``: the built-in workloads directly, any other kind
   (a custom resource with a scale subresource) found by discovery from the
   reference's ``apiVersion`` and ``kind``, as upstream's scale client does;
2. a target at 0 replicas is left alone (``ScalingActive=False``,
   ``ScalingDisabled``); one outside ``[minReplicas, maxReplicas]`` goes
   straight to the nearest bound; otherwise every metric proposes a count
   (:mod:`.proposals`: Resource, ContainerResource, Pods, Object, External)
   and the largest wins; if none could be computed nothing is scaled
   (``ScalingActive=False`` with the first failure's reason, and a
   ``FailedComputeMetricsReplicas`` Event);
3. the proposal is normalized (:mod:`.behavior`): with ``spec.behavior`` by
   its stabilization windows and policies, without one by upstream's older
   rules (scale-down stabilization over
   ``--horizontal-pod-autoscaler-downscale-stabilization``, scale-up at most
   ``max(2 × current, 4)``), and bounded by min/max; ``AbleToScale`` and
   ``ScalingLimited`` say what changed it;
4. a new count is written to the scale subresource with a
   ``SuccessfulRescale`` Event ("New size: N; reason: …"; if the write is
   refused, ``FailedRescale`` and ``AbleToScale=False`` ``FailedUpdateScale``
   instead, retried at the next sync), and the status
   (current/desired replicas, currentMetrics, lastScaleTime, conditions) is
   written.

Metrics come from a :class:`~.metrics.MetricsSource` (the three metrics APIs by
default; tests may inject another).
"""

from __future__ import annotations

import logging
from typing import Any

from k8py.api.errors import NotFound, StatusError
from k8py.api.selectors import parse_label_selector
from k8py.client.keys import split_key
from k8py.client.resource import Resource
from k8py.client.resources import (DEPLOYMENTS, HORIZONTAL_POD_AUTOSCALERS, PODS, REPLICASETS, REPLICATION_CONTROLLERS,
                                   STATEFULSETS)
from k8py.client.rest import PatchType
from k8py.controllers.context import ControllerContext
from k8py.controllers.keyed_controller import KeyedController
from k8py.controllers.pod_status import format_time
from k8py.controllers.podautoscaler.behavior import Behavior, History, normalize
from k8py.controllers.podautoscaler.metrics import MetricsSource, RestMetricsClient
from k8py.controllers.podautoscaler.monitor import Monitor, action_label
from k8py.controllers.podautoscaler.proposals import Proposal, propose
from k8py.controllers.podautoscaler.replicas import Calculator

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
        self.metrics: MetricsSource = metrics or ctx.options.extra.get("hpa_metrics") or RestMetricsClient(ctx.client)
        self.sync_period = float(ctx.options.extra.get("hpa_sync_period", 15.0))
        self.tolerance = float(ctx.options.extra.get("hpa_tolerance", 0.1))
        self.downscale_window = float(ctx.options.extra.get("hpa_downscale_stabilization", 300.0))
        self.cpu_initialization_period = float(ctx.options.extra.get("hpa_cpu_initialization_period", 300.0))
        self.initial_readiness_delay = float(ctx.options.extra.get("hpa_initial_readiness_delay", 30.0))
        self.history: dict[str, History] = {}
        self.monitor = Monitor(ctx.registry)
        self.hpas.add_event_handler(on_add=self.enqueue, on_update=self._changed, on_delete=self._deleted)

    def _changed(self, old: Any, new: Any) -> None:
        if old.get("spec") != new.get("spec"):  # our own status writes do not re-run the sync
            self.enqueue(new)

    def _deleted(self, obj: Any) -> None:
        meta = (getattr(obj, "obj", obj) or {}).get("metadata") or {}
        self.history.pop(f"{meta.get('namespace')}/{meta.get('name')}", None)

    async def sync(self, key: str) -> float | None:
        labels = {"action": "none", "error": "none"}
        started = self.clock.monotonic()
        try:
            return await self._reconcile(key, labels)
        finally:
            if labels.get("seen"):
                self.monitor.reconciliation(labels["action"], labels["error"], self.clock.monotonic() - started)

    async def _reconcile(self, key: str, labels: dict[str, Any]) -> float | None:
        """One sync of ``key``; ``labels`` collects its ``action`` and ``error`` for the
        monitor (``seen``: there was an HPA to reconcile, so the sync counts)."""
        namespace, name = split_key(key)
        hpa = self.hpas.lister.try_get(namespace, name)
        if hpa is None:
            return None
        labels["seen"] = True
        spec = hpa.get("spec") or {}
        ref = spec.get("scaleTargetRef") or {}
        conditions: dict[str, tuple[str, str, str]] = {}
        try:
            resource = await self._target(ref)
            scale = await self.client.get(resource, namespace, ref.get("name") or "", subresource="scale")
        except StatusError as err:
            message = f"the HPA controller was unable to get the target's current scale: {err.message}"
            conditions["AbleToScale"] = ("False", "FailedGetScale", message)
            labels["error"] = "spec" if isinstance(err, NotFound) and "no matches for kind" in err.message else "internal"
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
        desired: int
        why = ""
        if current > high:  # upstream: straight to the bounds, metrics or not
            desired, why = high, "Current number of replicas above Spec.MaxReplicas"
        elif current < low:
            desired, why = low, "Current number of replicas below Spec.MinReplicas"
        else:
            if not selector:
                self._warn(hpa, "SelectorRequired", "selector is required")
                conditions["ScalingActive"] = ("False", "InvalidSelector", "the HPA target's scale is missing a selector")
                await self._write_status(hpa, current, None, metrics_status, conditions, scaled=False)
                return self.sync_period
            proposal = await self._propose(hpa, namespace, selector, scale, current)
            metrics_status = proposal.statuses
            conditions["ScalingActive"] = proposal.condition
            if proposal.replicas is None:
                labels["error"] = proposal.error_label
                await self._write_status(hpa, current, None, metrics_status, conditions, scaled=False)
                self._warn(hpa, "FailedComputeMetricsReplicas", proposal.error)
                return self.sync_period
            recommended = proposal.replicas
            if recommended > current:
                why = f"{proposal.metric} above target"
            elif recommended < current:
                why = "All metrics below target"
            result = normalize(spec, history, now, current, recommended, downscale_window=self.downscale_window)
            conditions["AbleToScale"] = ("True", *result.able_to_scale)
            conditions["ScalingLimited"] = ("True" if result.limited else "False", *result.limit)
            desired = result.replicas
        scaled = desired != current
        labels["action"] = action_label(current, desired)
        if scaled:
            try:
                await self.client.patch(resource, namespace, ref["name"], {"spec": {"replicas": desired}},
                                        patch_type=PatchType.MERGE, subresource="scale")
            except StatusError as err:  # upstream: an Event, AbleToScale=False, and a retry at the next sync
                labels["error"] = "internal"
                self.recorder.eventf(hpa, "Warning", "FailedRescale", "New size: %d; reason: %s; error: %s", desired, why,
                                     err.message, resource=HORIZONTAL_POD_AUTOSCALERS)
                conditions["AbleToScale"] = ("False", "FailedUpdateScale",
                                             f"the HPA controller was unable to update the target scale: {err.message}")
                await self._write_status(hpa, current, None, metrics_status, conditions, scaled=False)
                return self.sync_period
            if spec.get("behavior") is not None:
                Behavior.record(history, now, current, desired)
            self.recorder.eventf(hpa, "Normal", "SuccessfulRescale", "New size: %d; reason: %s", desired, why,
                                 resource=HORIZONTAL_POD_AUTOSCALERS)
            conditions["AbleToScale"] = ("True", "SucceededRescale", f"the HPA controller was able to update the target scale to {desired}")
        await self._write_status(hpa, current, desired, metrics_status, conditions, scaled=scaled)
        return self.sync_period

    def _warn(self, hpa: Any, reason: str, message: str) -> None:
        self.recorder.event(hpa, "Warning", reason, message, resource=HORIZONTAL_POD_AUTOSCALERS)

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

    async def _propose(self, hpa: Any, namespace: str, selector: str, scale: Any, current: int) -> Proposal:
        match = parse_label_selector(selector)
        pods = [p for p in self.pods.lister.list(namespace=namespace) if match.matches((p.get("metadata") or {}).get("labels") or {})]
        calc = Calculator(self.clock.now().timestamp(), self.tolerance, self.cpu_initialization_period, self.initial_readiness_delay)
        status_replicas = int((scale.get("status") or {}).get("replicas") or 0)
        return await propose((hpa.get("spec") or {}).get("metrics") or [], namespace=namespace, selector=selector, pods=pods,
                             spec_replicas=current, status_replicas=status_replicas, source=self.metrics, calc=calc,
                             warn=lambda reason, message: self._warn(hpa, reason, message),
                             observe=self.monitor.metric_computation, timer=self.clock.monotonic)

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
