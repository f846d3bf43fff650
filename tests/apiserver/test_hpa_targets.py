"""The TARGETS cell of ``kubectl get hpa`` (upstream ``formatHPAMetrics``) for
every metric type, paired with ``currentMetrics`` by position."""

from __future__ import annotations

from typing import Any

from k8py.apiserver.printers.autoscaling import _targets


def _hpa(metrics: list[dict[str, Any]], current: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"spec": {"maxReplicas": 5, "metrics": metrics}, "status": {"currentMetrics": current} if current is not None else {}}


CPU = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}
MEM = {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "1Gi"}}}
PODS = {"type": "Pods", "pods": {"metric": {"name": "rps"}, "target": {"type": "AverageValue", "averageValue": "0.5"}}}
OBJ = {"type": "Object", "object": {"describedObject": {"kind": "Service", "name": "s"}, "metric": {"name": "hits"},
                                    "target": {"type": "Value", "value": "2000m"}}}
EXT = {"type": "External", "external": {"metric": {"name": "q"}, "target": {"type": "AverageValue", "averageValue": "30"}}}


def test_each_metric_type_prints_as_upstream_and_unknown_until_measured():
    assert _targets(_hpa([CPU, MEM])) == "cpu: <unknown>/50%, memory: <unknown>/1Gi"
    assert _targets(_hpa([PODS, OBJ], [{"type": "Pods", "pods": {"current": {"averageValue": "250m"}}},
                                       {"type": "Object", "object": {"current": {"value": "3"}}}])) == "250m/500m, 3/2"
    assert _targets(_hpa([EXT], [{"type": "External", "external": {"current": {"averageValue": "15"}}}])) == "15/30 (avg)"


def test_statuses_pair_by_position_a_failed_one_is_unknown_and_more_than_two_are_counted():
    current = [{"type": ""}, {"type": "Resource", "resource": {"name": "memory", "current": {"averageValue": "512Mi"}}}]
    assert _targets(_hpa([CPU, MEM], current)) == "cpu: <unknown>/50%, memory: 512Mi/1Gi"
    assert _targets(_hpa([CPU, MEM, PODS, EXT])) == "cpu: <unknown>/50%, memory: <unknown>/1Gi + 2 more..."
    assert _targets(_hpa([])) == "<none>"
