"""HorizontalPodAutoscalers: one stored object served as autoscaling/v2 and v1,
``kubectl autoscale`` / ``kubectl get hpa``, and the controller scaling a
ReplicaSet up on high CPU and back down after the (shortened) stabilization.

The controller's metrics source is replaced here by a table the test sets, so
that the algorithm's figures (150% -> 3 replicas) are exact; everything else is
real: API server, scale subresource, ReplicaSet controller, kubectl. The same
controller on real metrics (CPU-burning pod processes measured by a kubelet,
served as ``metrics.k8s.io``) is test_hpa_real_metrics_e2e.py."""

from __future__ import annotations

import asyncio
import time
from fractions import Fraction
from typing import Any

from k8py.client.resource import Resource
from k8py.client.rest import PatchType
from k8py.client.resources import CORE_EVENTS, HORIZONTAL_POD_AUTOSCALERS, NODES, PODS, REPLICASETS
from k8py.controllers.context import ControllerOptions
from k8py.controllers.podautoscaler.replicas import MetricError, PodMetric
from tests.controllers.conftest import eventually, running
from tests.support.kube import Kubectl
from tests.support.pod_driver import PodDriver

HPA_V1 = Resource("autoscaling", "v1", "horizontalpodautoscalers", True, "HorizontalPodAutoscaler")


class TableMetrics:
    """Every pod uses ``per_pod`` cores, sampled now (a window of 0 s, so never
    before a pod's readiness change)."""

    def __init__(self) -> None:
        self.per_pod: Fraction | None = Fraction(0)
        self.client: Any = None

    async def resource_metric(self, namespace: str, selector: str, resource: str, container: str = "") -> dict[str, PodMetric]:
        if self.per_pod is None:  # the metrics API has nothing for these pods (yet)
            raise MetricError("no metrics returned from resource metrics API")
        pods = (await self.client.list(PODS, namespace, label_selector=selector))["items"]
        return {p["metadata"]["name"]: PodMetric(int(self.per_pod * 1000), time.time(), 0.0)
                for p in pods if not p["metadata"].get("deletionTimestamp")}


def _rs(replicas: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "burn", "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "burn"}},
                     "template": {"metadata": {"labels": {"app": "burn"}},
                                  "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "100m"}}}]}}}}


async def test_one_object_two_versions_and_kubectl_autoscale(client, server, tmp_path):
    await client.create(REPLICASETS, _rs(1))
    kubectl = Kubectl(server.url, str(tmp_path / "home"))
    out = (await asyncio.to_thread(kubectl.run, "autoscale", "rs", "burn", "--cpu-percent=50", "--min=1", "--max=5")).stdout
    assert "horizontalpodautoscaler.autoscaling/burn autoscaled" in out
    v2 = await client.get(HORIZONTAL_POD_AUTOSCALERS, "default", "burn")
    assert v2["apiVersion"] == "autoscaling/v2"
    assert v2["spec"]["metrics"] == [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]
    assert (v2["spec"]["minReplicas"], v2["spec"]["maxReplicas"]) == (1, 5)
    v1 = await client.get(HPA_V1, "default", "burn")
    assert v1["apiVersion"] == "autoscaling/v1" and v1["spec"]["targetCPUUtilizationPercentage"] == 50
    assert "metrics" not in v1["spec"]
    table = (await asyncio.to_thread(kubectl.run, "get", "hpa")).stdout.splitlines()
    assert table[0].split() == ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"]
    assert table[1].split()[:7] == ["burn", "ReplicaSet/burn", "cpu:", "<unknown>/50%", "1", "5", "0"]


async def test_hpa_scales_up_on_cpu_and_back_down_after_stabilization(client, start_manager):
    await client.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    metrics = TableMetrics()
    metrics.client = client
    options = ControllerOptions(extra={"hpa_metrics": metrics, "hpa_sync_period": 0.2})
    await start_manager("replicaset", "horizontalpodautoscaling", options=options)
    driver = PodDriver(client, node_name="n1")
    async with running(driver.run(), "driver"):
        await client.create(REPLICASETS, _rs(1))
        await client.create(HORIZONTAL_POD_AUTOSCALERS, {
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "burn", "namespace": "default"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "burn"}, "minReplicas": 1, "maxReplicas": 4,
                     "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}],
                     "behavior": {"scaleDown": {"stabilizationWindowSeconds": 2}}}})

        async def hpa(**want: Any) -> Any:
            obj = await client.get(HORIZONTAL_POD_AUTOSCALERS, "default", "burn")
            status = obj.get("status") or {}
            return obj if all(status.get(k) == v for k, v in want.items()) else None

        metrics.per_pod = None  # nothing measured yet: a condition and an Event, no scaling
        obj = await eventually(lambda: hpa(currentReplicas=1))

        async def no_metrics() -> Any:
            status = (await client.get(HORIZONTAL_POD_AUTOSCALERS, "default", "burn")).get("status") or {}
            return {c["type"]: c for c in status.get("conditions") or ()}.get("ScalingActive")

        active = await eventually(no_metrics)
        assert (active["status"], active["reason"]) == ("False", "FailedGetResourceMetric")
        assert active["message"] == ("the HPA was unable to compute the replica count: failed to get cpu utilization: "
                                     "unable to get metrics for resource cpu: no metrics returned from resource metrics API")
        metrics.per_pod = Fraction(1, 20)  # 50m of 100m: at target
        obj = await eventually(lambda: hpa(currentReplicas=1, desiredReplicas=1))
        metrics.per_pod = Fraction(15, 100)  # 150%: three times the target -> 3 replicas
        obj = await eventually(lambda: hpa(desiredReplicas=3), timeout=60)
        assert (await client.get(REPLICASETS, "default", "burn"))["spec"]["replicas"] == 3
        assert obj["status"]["currentMetrics"][0]["resource"]["current"]["averageUtilization"] == 150
        conds = {c["type"]: c for c in obj["status"]["conditions"]}
        assert conds["ScalingActive"]["reason"] == "ValidMetricFound"
        assert obj["status"].get("lastScaleTime")

        metrics.per_pod = Fraction(1, 100)  # 10%: down to the minimum once the window has passed
        obj = await eventually(lambda: hpa(desiredReplicas=1), timeout=60)
        assert (await client.get(REPLICASETS, "default", "burn"))["spec"]["replicas"] == 1
        conds = {c["type"]: c for c in obj["status"]["conditions"]}
        assert conds["ScalingLimited"]["reason"] == "DesiredWithinRange"
        assert conds["AbleToScale"]["message"].endswith("to update the target scale to 1") or conds["AbleToScale"]["reason"] == "ReadyForNewScale"
        v1 = await client.get(HPA_V1, "default", "burn")
        assert v1["status"]["currentCPUUtilizationPercentage"] == 10


async def test_an_hpa_without_behavior_follows_upstreams_older_rules(client, start_manager):
    """autoscaling/v1 (no behavior): each scale-up at most max(2 x current, 4), then
    maxReplicas; scale-down held for --horizontal-pod-autoscaler-downscale-stabilization."""
    await client.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    metrics = TableMetrics()
    metrics.client = client
    metrics.per_pod = Fraction(1, 2)  # 500% of 100m: ten times the 50% target
    options = ControllerOptions(extra={"hpa_metrics": metrics, "hpa_sync_period": 0.2, "hpa_downscale_stabilization": 3.0})
    manager = await start_manager("replicaset", "horizontalpodautoscaling", options=options)
    async with running(PodDriver(client, node_name="n1").run(), "driver"):
        await client.create(REPLICASETS, _rs(1))
        await client.create(HPA_V1, {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
                                     "metadata": {"name": "burn", "namespace": "default"},
                                     "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "burn"},
                                              "minReplicas": 1, "maxReplicas": 10, "targetCPUUtilizationPercentage": 50}})
        assert "behavior" not in (await client.get(HORIZONTAL_POD_AUTOSCALERS, "default", "burn"))["spec"]

        async def sizes() -> list[str]:
            events = (await client.list(CORE_EVENTS, "default"))["items"]
            return sorted(e["message"] for e in events if e["reason"] == "SuccessfulRescale")

        reason = "cpu resource utilization (percentage of request) above target"

        async def grown() -> Any:
            got = await sizes()
            return got if f"New size: 10; reason: {reason}" in got else None

        got = await eventually(grown, timeout=90)
        assert got == sorted(f"New size: {n}; reason: {reason}" for n in (4, 8, 10))  # 1 -> 4 -> 8 -> 10, never straight to 10
        v2 = await client.get(HORIZONTAL_POD_AUTOSCALERS, "default", "burn")
        conds = {c["type"]: c for c in v2["status"]["conditions"]}
        assert (conds["ScalingLimited"]["status"], conds["ScalingLimited"]["reason"]) == ("True", "TooManyReplicas")
        # the controller's own metrics, on the manager's /metrics (upstream's monitor)
        from prometheus_client import generate_latest

        exposed = generate_latest(manager.registry).decode()
        assert 'horizontal_pod_autoscaler_controller_reconciliations_total{action="scale_up",error="none"}' in exposed
        assert ('horizontal_pod_autoscaler_controller_metric_computation_total{action="scale_up",error="none",metric_type="Resource"}'
                in exposed)
        assert "horizontal_pod_autoscaler_controller_reconciliation_duration_seconds_bucket" in exposed

        metrics.per_pod = Fraction(1, 100)  # 10%: recommended 2, held at 10 for the window, then written

        async def held() -> Any:
            obj = await client.get(HORIZONTAL_POD_AUTOSCALERS, "default", "burn")
            conds = {c["type"]: c for c in obj["status"]["conditions"]}
            return conds["AbleToScale"] if conds["AbleToScale"]["reason"] == "ScaleDownStabilized" else None

        able = await eventually(held, timeout=30)
        assert able["message"] == "recent recommendations were higher than current one, applying the highest recent recommendation"

        async def shrunk() -> bool:
            return (await client.get(REPLICASETS, "default", "burn"))["spec"]["replicas"] == 2

        await eventually(shrunk, timeout=60)

        async def told() -> bool:  # Events are written after the scale, by the recorder's own task
            return "New size: 2; reason: All metrics below target" in await sizes()

        await eventually(told, timeout=30)


CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", False, "CustomResourceDefinition")
BURNERS = Resource("example.com", "v1", "burners", True, "Burner")


async def test_any_target_with_a_scale_subresource_is_scaled_and_an_unknown_kind_is_a_condition(client, start_manager):
    await client.create(CRDS, {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "burners.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "burners", "kind": "Burner"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                                                                        "statusReplicasPath": ".status.replicas",
                                                                        "labelSelectorPath": ".status.selector"}},
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}})

    async def served() -> bool:
        try:
            await client.list(BURNERS, "default")
            return True
        except Exception:
            return False

    await eventually(served, timeout=30)
    burner = await client.create(BURNERS, {"apiVersion": "example.com/v1", "kind": "Burner", "metadata": {"name": "b"},
                                           "spec": {"replicas": 1}}, namespace="default")
    burner["status"] = {"replicas": 1, "selector": "app=crburn"}
    await client.update_status(BURNERS, burner)
    await client.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    metrics = TableMetrics()
    metrics.client = client
    metrics.per_pod = Fraction(15, 100)  # 150% of 100m, three times the target: 3 replicas from 1
    await start_manager("horizontalpodautoscaling", options=ControllerOptions(extra={"hpa_metrics": metrics, "hpa_sync_period": 0.2}))
    driver = PodDriver(client, node_name="n1")
    async with running(driver.run(), "driver"):
        await client.create(PODS, {"metadata": {"name": "crburn-0", "labels": {"app": "crburn"}}, "spec": {
            "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "100m"}}}]}}, namespace="default")

        def hpa(name: str, kind: str) -> dict[str, Any]:
            return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": name, "namespace": "default"},
                    "spec": {"scaleTargetRef": {"apiVersion": "example.com/v1", "kind": kind, "name": "b"}, "minReplicas": 1, "maxReplicas": 4,
                             "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]}}

        await client.create(HORIZONTAL_POD_AUTOSCALERS, hpa("b", "Burner"))
        await client.create(HORIZONTAL_POD_AUTOSCALERS, hpa("nope", "Nope"))

        async def scaled() -> bool:
            return (await client.get(BURNERS, "default", "b"))["spec"]["replicas"] == 3

        await eventually(scaled, timeout=60)

        async def refused() -> Any:
            status = (await client.get(HORIZONTAL_POD_AUTOSCALERS, "default", "nope")).get("status") or {}
            return {c["type"]: c for c in status.get("conditions") or ()}.get("AbleToScale")

        # a lower maximum: straight down to it, whatever the metrics say
        await client.patch(HORIZONTAL_POD_AUTOSCALERS, "default", "b", {"spec": {"maxReplicas": 2}}, patch_type=PatchType.MERGE)

        async def capped() -> bool:
            return (await client.get(BURNERS, "default", "b"))["spec"]["replicas"] == 2

        await eventually(capped, timeout=60)

        async def reason_given() -> bool:
            events = (await client.list(CORE_EVENTS, "default"))["items"]
            return any(e["message"] == "New size: 2; reason: Current number of replicas above Spec.MaxReplicas" for e in events)

        await eventually(reason_given, timeout=30)
        cond = await eventually(refused, timeout=30)
        assert (cond["status"], cond["reason"]) == ("False", "FailedGetScale")
        assert cond["message"] == ("the HPA controller was unable to get the target's current scale: "
                                   'no matches for kind "Nope" in group "example.com"')


async def test_a_given_behavior_is_defaulted_as_upstream_and_an_absent_one_stays_absent(client):
    def hpa(name: str, **spec: Any) -> dict[str, Any]:
        return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": name, "namespace": "default"},
                "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "x"}, "maxReplicas": 3, **spec}}

    plain = await client.create(HORIZONTAL_POD_AUTOSCALERS, hpa("plain"))
    assert "behavior" not in plain["spec"]
    given = await client.create(HORIZONTAL_POD_AUTOSCALERS, hpa("given", behavior={"scaleDown": {"stabilizationWindowSeconds": 60}}))
    assert given["spec"]["behavior"] == {
        "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                    "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15}, {"type": "Percent", "value": 100, "periodSeconds": 15}]},
        "scaleDown": {"stabilizationWindowSeconds": 60, "selectPolicy": "Max",
                      "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}}


CAPPEDS = Resource("example.com", "v1", "cappeds", True, "Capped")


async def test_a_refused_scale_update_is_a_failed_rescale_event_and_condition(client, start_manager):
    schema = {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"replicas": {"type": "integer", "maximum": 2}}},
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}
    await client.create(CRDS, {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "cappeds.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "cappeds", "kind": "Capped"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema},
                               "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                                                                        "statusReplicasPath": ".status.replicas",
                                                                        "labelSelectorPath": ".status.selector"}}}]}})

    async def served() -> bool:
        try:
            await client.list(CAPPEDS, "default")
            return True
        except Exception:
            return False

    await eventually(served, timeout=30)
    capped = await client.create(CAPPEDS, {"apiVersion": "example.com/v1", "kind": "Capped", "metadata": {"name": "c"},
                                           "spec": {"replicas": 1}}, namespace="default")
    capped["status"] = {"replicas": 1, "selector": "app=capped"}
    await client.update_status(CAPPEDS, capped)
    await client.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    metrics = TableMetrics()
    metrics.client = client
    metrics.per_pod = Fraction(15, 100)  # 150% of a 50% target: 3 replicas, which the schema refuses
    await start_manager("horizontalpodautoscaling", options=ControllerOptions(extra={"hpa_metrics": metrics, "hpa_sync_period": 0.2}))
    async with running(PodDriver(client, node_name="n1").run(), "driver"):
        await client.create(PODS, {"metadata": {"name": "capped-0", "labels": {"app": "capped"}}, "spec": {
            "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "100m"}}}]}}, namespace="default")
        await client.create(HORIZONTAL_POD_AUTOSCALERS, {
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "c", "namespace": "default"},
            "spec": {"scaleTargetRef": {"apiVersion": "example.com/v1", "kind": "Capped", "name": "c"}, "minReplicas": 1, "maxReplicas": 4,
                     "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]}})

        async def failed() -> Any:
            events = (await client.list(CORE_EVENTS, "default"))["items"]
            return next((e for e in events if e["reason"] == "FailedRescale"), None)

        event = await eventually(failed, timeout=60)
        assert event["type"] == "Warning"
        assert event["message"].startswith("New size: 3; reason: cpu resource utilization (percentage of request) above target; error: ")
        assert "spec.replicas" in event["message"]

        async def condition() -> Any:
            status = (await client.get(HORIZONTAL_POD_AUTOSCALERS, "default", "c")).get("status") or {}
            able = {c["type"]: c for c in status.get("conditions") or ()}.get("AbleToScale")
            return able if able and able["reason"] == "FailedUpdateScale" else None

        able = await eventually(condition, timeout=30)
        assert able["status"] == "False" and able["message"].startswith("the HPA controller was unable to update the target scale: ")
        assert (await client.get(CAPPEDS, "default", "c"))["spec"]["replicas"] == 1


async def test_behavior_rules_are_validated_as_upstream(client):
    from k8py.api.errors import Invalid

    body = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "bad", "namespace": "default"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "x"}, "maxReplicas": 3, "behavior": {
                "scaleUp": {"stabilizationWindowSeconds": 4000, "selectPolicy": "Most"},
                "scaleDown": {"policies": [{"type": "Pods", "value": 0, "periodSeconds": 2000}, {"type": "Nodes", "value": 1, "periodSeconds": 15}]}}}}
    try:
        await client.create(HORIZONTAL_POD_AUTOSCALERS, body)
    except Invalid as err:
        message = err.message
    else:
        raise AssertionError("an invalid behavior was accepted")
    for part in ("spec.behavior.scaleUp.stabilizationWindowSeconds: Invalid value: 4000: must be less than or equal to 3600",
                 'spec.behavior.scaleUp.selectPolicy: Unsupported value: "Most": supported values: "Disabled", "Max", "Min"',
                 "spec.behavior.scaleDown.policies[0].value: Invalid value: 0: must be greater than zero",
                 "spec.behavior.scaleDown.policies[0].periodSeconds: Invalid value: 2000: must be less than or equal to 1800",
                 'spec.behavior.scaleDown.policies[1].type: Unsupported value: "Nodes": supported values: "Percent", "Pods"'):
        assert part in message, (part, message)
    body["spec"]["behavior"] = {"scaleDown": {"policies": []}}
    try:
        await client.create(HORIZONTAL_POD_AUTOSCALERS, body)
    except Invalid as err:
        assert "spec.behavior.scaleDown.policies: Required value: must specify at least one Policy" in err.message
    else:
        raise AssertionError("a behavior without policies was accepted")
