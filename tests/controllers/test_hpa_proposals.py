"""The per-metric proposals of an HPA (``computeReplicasForMetrics``) over a
table metrics source: which metric wins, the statuses written per index, the
Warning reasons and messages of failed metrics, and when failures stop a
scale (all failed, or some failed and the rest would scale down)."""

from __future__ import annotations

from typing import Any

from k8py.controllers.podautoscaler.proposals import go_label_selector, propose
from k8py.controllers.podautoscaler.replicas import Calculator, MetricError, PodMetric

NOW = 1_767_229_200.0  # 2026-01-01T01:00:00Z, an hour after the pods started


def _pod(name: str, cpu: str = "100m") -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"containers": [
                {"name": "app", "resources": {"requests": {"cpu": cpu}}},
                {"name": "sidecar", "resources": {"requests": {"cpu": cpu}}}]},
            "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z",
                       "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}


class Source:
    def __init__(self, **values: Any) -> None:
        self.values = values
        self.asked: list[tuple[Any, ...]] = []

    def _get(self, key: str) -> Any:
        value = self.values.get(key)
        if isinstance(value, Exception):
            raise value
        return value

    async def resource_metric(self, namespace: str, selector: str, resource: str, container: str = "") -> dict[str, PodMetric]:
        self.asked.append(("resource", resource, container))
        return {n: PodMetric(v, NOW - 5, 1.0) for n, v in self._get(f"{resource}/{container}").items()}

    async def pods_metric(self, namespace: str, metric: str, selector: str, metric_selector: str) -> dict[str, PodMetric]:
        self.asked.append(("pods", metric, selector, metric_selector))
        return {n: PodMetric(v, NOW - 5, 1.0) for n, v in self._get(metric).items()}

    async def object_metric(self, namespace: str, metric: str, ref: dict[str, Any], metric_selector: str) -> int:
        self.asked.append(("object", metric, ref["kind"]))
        return self._get(metric)

    async def external_metric(self, namespace: str, metric: str, metric_selector: str) -> list[int]:
        self.asked.append(("external", metric, metric_selector))
        return self._get(metric)


async def _propose(metrics: list[dict[str, Any]], source: Source, *, replicas: int = 2) -> tuple[Any, list[tuple[str, str]]]:
    warnings: list[tuple[str, str]] = []
    out = await propose(metrics, namespace="ns", selector="app=web", pods=[_pod("a"), _pod("b")], spec_replicas=replicas,
                        status_replicas=replicas, source=source, calc=Calculator(NOW),
                        warn=lambda reason, message: warnings.append((reason, message)))
    return out, warnings


PODS = {"type": "Pods", "pods": {"metric": {"name": "rps", "selector": {"matchLabels": {"verb": "GET"}}},
                                 "target": {"type": "AverageValue", "averageValue": "10"}}}
EXTERNAL = {"type": "External", "external": {"metric": {"name": "queue", "selector": {"matchLabels": {"q": "jobs"}}},
                                             "target": {"type": "Value", "value": "100"}}}
CONTAINER = {"type": "ContainerResource", "containerResource": {"name": "cpu", "container": "app",
                                                                 "target": {"type": "Utilization", "averageUtilization": 50}}}


async def test_the_largest_proposal_wins_and_each_metric_has_its_status_by_position():
    source = Source(rps={"a": 30_000, "b": 30_000}, queue=[150_000, 50_000], **{"cpu/app": {"a": 100, "b": 100}})
    out, warnings = await _propose([PODS, EXTERNAL, CONTAINER], source)
    assert warnings == [] and out.replicas == 6 and out.metric == "pods metric rps"
    assert out.statuses[0] == {"type": "Pods", "pods": {"metric": PODS["pods"]["metric"], "current": {"averageValue": "30"}}}
    assert out.statuses[1] == {"type": "External", "external": {"metric": EXTERNAL["external"]["metric"], "current": {"value": "200"}}}
    # the container's request alone (100m), not the pod's (200m): 100%
    assert out.statuses[2] == {"type": "ContainerResource", "containerResource": {
        "name": "cpu", "container": "app", "current": {"averageUtilization": 100, "averageValue": "100m"}}}
    assert out.condition == ("True", "ValidMetricFound", "the HPA was able to successfully calculate a replica count from pods metric rps")
    assert ("pods", "rps", "app=web", "verb=GET") in source.asked and ("external", "queue", "q=jobs") in source.asked


async def test_a_failed_metric_is_a_warning_and_an_empty_status_and_the_others_still_scale_up():
    source = Source(rps=MetricError("no metrics returned from custom metrics API"), queue=[400_000])
    out, warnings = await _propose([PODS, EXTERNAL], source)
    assert warnings == [("FailedGetPodsMetric", "unable to get metric rps: no metrics returned from custom metrics API")]
    assert out.statuses[0] == {"type": ""} and out.replicas == 8  # 400 / 100 x 2 ready pods
    assert out.metric == f"external metric queue({go_label_selector(EXTERNAL['external']['metric']['selector'])})"
    assert out.condition[1] == "ValidMetricFound"
    assert out.error == ("invalid metrics (1 invalid out of 2), first error is: failed to get pods metric value: "
                         "unable to get metric rps: no metrics returned from custom metrics API")


async def test_failures_with_the_rest_scaling_down_or_all_failing_stop_the_scale():
    source = Source(rps=MetricError("boom"), queue=[10_000])
    out, _ = await _propose([PODS, EXTERNAL], source)  # the external metric alone would go down to 1
    assert out.replicas is None
    assert out.condition == ("False", "FailedGetPodsMetric", "the HPA was unable to compute the replica count: unable to get metric rps: boom")
    source = Source(queue=MetricError("no metrics returned from external metrics API"))
    out, warnings = await _propose([EXTERNAL], source)
    assert out.replicas is None and out.condition[1] == "FailedGetExternalMetric"
    selector = go_label_selector(EXTERNAL["external"]["metric"]["selector"])
    assert warnings == [("FailedGetExternalMetric", f"failed to get external metric queue: unable to get external metric ns/queue/"
                         f"{selector}: no metrics returned from external metrics API")]
    assert selector == "&LabelSelector{MatchLabels:map[string]string{q: jobs,},MatchExpressions:[]LabelSelectorRequirement{},}"


async def test_object_metrics_by_value_and_per_replica_and_an_invalid_target():
    ref = {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "name": "main"}
    by_value = {"type": "Object", "object": {"describedObject": ref, "metric": {"name": "hits"},
                                             "target": {"type": "Value", "value": "2k"}}}
    per_replica = {"type": "Object", "object": {"describedObject": ref, "metric": {"name": "hits"},
                                                "target": {"type": "AverageValue", "averageValue": "500"}}}
    out, _ = await _propose([by_value], Source(hits=6_000_000))
    assert (out.replicas, out.metric) == (6, "Ingress metric hits")  # 6k / 2k x 2 ready pods
    assert out.statuses[0]["object"] == {"describedObject": ref, "metric": {"name": "hits"}, "current": {"value": "6k"}}
    out, _ = await _propose([per_replica], Source(hits=3_000_000))
    assert out.replicas == 6 and out.statuses[0]["object"]["current"] == {"averageValue": "1500"}
    invalid = {"type": "Object", "object": {"describedObject": ref, "metric": {"name": "hits"}, "target": {"type": "Utilization"}}}
    out, warnings = await _propose([invalid], Source())
    assert warnings == [("FailedGetObjectMetric", "invalid object metric source: neither a value target nor an average value target was set")]


async def test_resource_metric_messages_name_the_resource_as_upstream():
    average = {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "100Mi"}}}
    source = Source(**{"memory/": MetricError("no metrics returned from resource metrics API")})
    out, warnings = await _propose([average], source)
    assert warnings == [("FailedGetResourceMetric", "failed to get memory usage: unable to get metrics for resource memory: "
                         "no metrics returned from resource metrics API")]
    assert out.condition[2].startswith("the HPA was unable to compute the replica count: failed to get memory usage: ")
