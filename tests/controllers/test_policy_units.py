"""Table tests of the pure parts: quota charges and scopes, node taints from conditions, toleration matching."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from k8py.api.quota import format_amount, matches_scopes, usage
from k8py.controllers.node_lifecycle import desired_taints
from k8py.controllers.node_taints import min_toleration_seconds, untolerated


def _pod(name: str, cpu: str = "100m", ready: bool = True, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}], **spec},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_pod_quota_charges_and_scopes():
    pod = _pod("a", cpu="250m")
    charge = usage("pods", "", pod)
    assert charge["pods"] == 1 and charge["count/pods"] == 1 and charge["requests.cpu"] == Fraction(1, 4) == charge["cpu"]
    done = dict(pod, status={"phase": "Succeeded"})
    assert "pods" not in usage("pods", "", done) and usage("pods", "", done)["count/pods"] == 1
    assert usage("deployments", "apps", {})["count/deployments.apps"] == 1
    best_effort = {"spec": {"scopes": ["BestEffort"]}}
    assert not matches_scopes(best_effort, "pods", "", pod)
    assert matches_scopes(best_effort, "pods", "", {"spec": {"containers": [{"name": "c"}]}})
    assert format_amount("requests.cpu", Fraction(1, 2)) == "500m" and format_amount("memory", Fraction(2**30)) == "1Gi"


def test_node_taints_follow_conditions_and_keep_user_taints():
    node = {"spec": {"unschedulable": True, "taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
                                                       {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]},
            "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}
    taints = desired_taints(node, "2026-01-01T00:00:00Z")
    assert [(t["key"], t["effect"]) for t in taints] == [
        ("dedicated", "NoSchedule"), ("node.kubernetes.io/unreachable", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule"), ("node.kubernetes.io/unreachable", "NoExecute")]
    node["spec"]["unschedulable"] = False
    node["status"]["conditions"][0]["status"] = "True"
    assert desired_taints(node, "t") == [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]


def test_toleration_seconds_and_untolerated_taints():
    taint = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}
    assert untolerated([taint], [{"key": "other", "operator": "Exists"}]) == [taint]
    tolerations = [{"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
                   {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 10}]
    assert untolerated([taint], tolerations) == [] and min_toleration_seconds([taint], tolerations) == 10
    assert min_toleration_seconds([taint], [{"operator": "Exists"}]) is None
