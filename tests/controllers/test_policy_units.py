"""Table tests of the pure parts: the HPA replica calculation and behavior,
quota charges and scopes, node taints from conditions, toleration matching."""

from __future__ import annotations

from datetime import datetime, timezone
from fractions import Fraction
from typing import Any

from k8py.api.quota import format_amount, matches_scopes, usage
from k8py.controllers.node_lifecycle import desired_taints
from k8py.controllers.node_taints import min_toleration_seconds, untolerated
from k8py.controllers.podautoscaler.behavior import Behavior, History
from k8py.controllers.podautoscaler.replicas import Readiness, utilization_replicas


def _pod(name: str, cpu: str = "100m", ready: bool = True, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}], **spec},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_within_tolerance_keeps_the_count_and_beyond_it_scales_by_the_ratio():
    pods = [_pod("a"), _pod("b")]
    assert utilization_replicas(2, 50, "cpu", pods, {"a": Fraction(54, 1000), "b": Fraction(54, 1000)}).replicas == 2
    p = utilization_replicas(2, 50, "cpu", pods, {"a": Fraction(1, 10), "b": Fraction(1, 10)})
    assert (p.replicas, p.utilization) == (4, 100)


def test_missing_metrics_count_as_full_request_when_scaling_down_and_zero_when_up():
    pods = [_pod("a"), _pod("b"), _pod("c")]
    # two measured at 10% (down), one missing assumed at 100%: (10+10+100)/3 = 40% of a 50% target
    assert utilization_replicas(3, 50, "cpu", pods, {"a": Fraction(1, 100), "b": Fraction(1, 100)}).replicas == 3
    # two measured at 100% (up), one unready ignored at 0: 200/3 = 67% of 50% -> 4
    pods[2] = _pod("c", ready=False)
    usage_ = {"a": Fraction(1, 10), "b": Fraction(1, 10), "c": Fraction(1, 10)}
    assert utilization_replicas(3, 50, "cpu", pods, usage_).replicas == 4


def _timed(name: str, *, started: float, ready: bool | None, changed: float, phase: str = "Running",
           memory: bool = False) -> dict[str, Any]:
    def at(t: float) -> str:
        return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

    requests = {"memory": "100Mi"} if memory else {"cpu": "100m"}
    conditions = [] if ready is None else [{"type": "Ready", "status": str(ready), "lastTransitionTime": at(changed)}]
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]},
            "status": {"phase": phase, "startTime": at(started), "conditions": conditions}}


def test_cpu_of_unready_pods_counts_as_upstream_groups_them_and_memory_ignores_readiness():
    now = 10_000.0
    readiness = Readiness(now, cpu_initialization_period=300, initial_readiness_delay=30)
    hot = Fraction(2, 10)  # 200% of 100m
    # within the initialization period: an unready pod's sample is left out (0 when scaling up)
    young = [_timed("a", started=now - 60, ready=True, changed=now - 50),
             _timed("b", started=now - 60, ready=False, changed=now - 55)]
    p = utilization_replicas(2, 100, "cpu", young, {"a": hot, "b": hot}, readiness=readiness)
    assert (p.utilization, p.replicas) == (200, 2)  # (200 + 0) / 2 = 100%: at target
    # past it: a pod that was Ready and turned unready later still counts ...
    old = [_timed("a", started=now - 3600, ready=True, changed=now - 3000),
           _timed("b", started=now - 3600, ready=False, changed=now - 600)]
    assert utilization_replicas(2, 100, "cpu", old, {"a": hot, "b": hot}, readiness=readiness).replicas == 4
    # ... one that has never been Ready since its start does not
    old[1] = _timed("b", started=now - 3600, ready=False, changed=now - 3590)
    assert utilization_replicas(2, 100, "cpu", old, {"a": hot, "b": hot}, readiness=readiness).replicas == 2
    # no Ready condition at all, or Pending: unready
    old[1] = _timed("b", started=now - 3600, ready=None, changed=0)
    assert utilization_replicas(2, 100, "cpu", old, {"a": hot, "b": hot}, readiness=readiness).replicas == 2
    old[1] = _timed("b", started=now - 3600, ready=False, changed=now - 3590, phase="Pending")
    assert utilization_replicas(2, 100, "cpu", old, {"a": hot, "b": hot}, readiness=readiness).replicas == 2
    # memory: readiness does not matter, both samples count
    mem = [_timed("a", started=now - 60, ready=True, changed=now - 50, memory=True),
           _timed("b", started=now - 60, ready=False, changed=now - 55, memory=True)]
    used = Fraction(200 * 2**20)
    assert utilization_replicas(2, 100, "memory", mem, {"a": used, "b": used}, readiness=readiness).replicas == 4


def test_scale_down_waits_for_the_stabilization_window_and_scale_up_is_rate_limited():
    behavior = Behavior({"scaleDown": {"stabilizationWindowSeconds": 60}})
    history = History()
    assert behavior.stabilize(history, 0.0, 5, 5) == 5
    assert behavior.stabilize(history, 10.0, 5, 2) == 5  # 5 still within the window
    assert behavior.stabilize(history, 80.0, 5, 2) == 2
    assert Behavior(None).limit(History(), 0.0, 1, 10) == 5  # max(1 + 4 pods, 1 * 200%)
    assert Behavior({"scaleUp": {"selectPolicy": "Disabled"}}).limit(History(), 0.0, 1, 10) == 1


def test_bounds_and_rate_limits_name_the_scaling_limited_reason_as_upstream():
    default = Behavior(None)
    assert default.bounded(History(), 0.0, 1, 10, 1, 20)[:2] == (5, "ScaleUpLimit")
    assert default.bounded(History(), 0.0, 1, 10, 1, 3)[:2] == (3, "TooManyReplicas")
    assert default.bounded(History(), 0.0, 5, 0, 1, 10)[:2] == (1, "TooFewReplicas")
    assert default.bounded(History(), 0.0, 5, 4, 1, 10) == (4, "DesiredWithinRange", "the desired count is within the acceptable range")
    one_a_minute = Behavior({"scaleDown": {"policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]}})
    assert one_a_minute.bounded(History(), 0.0, 5, 1, 1, 10) == (
        4, "ScaleDownLimit", "the desired replica count is decreasing faster than the maximum scale rate")


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
