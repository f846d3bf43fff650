"""Table tests of the HPA's pure parts against upstream's figures: the replica
calculation (integer milli arithmetic, readiness and sample-time rules,
missing metrics), plain/object/external proposals, and both normalizers
(with ``spec.behavior`` and upstream's older rules without it)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from k8py.api.quantity import format_milli_quantity
from k8py.controllers.podautoscaler.behavior import Behavior, History, normalize
from k8py.controllers.podautoscaler.replicas import Calculator, MetricError, PodMetric

NOW = 100_000.0


def _at(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pod(name: str, *, cpu: str = "1", ready: bool | None = True, started: float = NOW - 3600, changed: float = NOW - 3500,
         phase: str = "Running", resource: str = "cpu", **meta: Any) -> dict[str, Any]:
    conditions = [] if ready is None else [{"type": "Ready", "status": str(ready), "lastTransitionTime": _at(changed)}]
    return {"metadata": {"name": name, **meta},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {resource: cpu}}}]},
            "status": {"phase": phase, "startTime": _at(started), "conditions": conditions}}


def _samples(**milli: int) -> dict[str, PodMetric]:
    return {name: PodMetric(value, NOW - 10, 30.0) for name, value in milli.items()}


CALC = Calculator(NOW)


def test_scale_up_is_ceil_of_ratio_times_ready_pods_on_truncated_utilization():
    pods = [_pod("a"), _pod("b"), _pod("c")]
    assert CALC.resource_replicas(3, 30, "cpu", pods, _samples(a=300, b=500, c=700)) == (5, 50, 500)
    # 100m of 300m is 33% (not 33.3): the ratio is taken from the truncated percentage
    small = [_pod("a", cpu="300m")]
    assert CALC.resource_replicas(1, 50, "cpu", small, _samples(a=100))[1] == 33
    # within the tolerance of the target: unchanged
    assert CALC.resource_replicas(3, 50, "cpu", pods, _samples(a=520, b=540, c=530))[0] == 3


def test_unready_pods_count_as_zero_when_scaling_up_and_are_left_out_when_scaling_down():
    never = dict(ready=False, changed=NOW - 3590)  # not Ready since its start
    up = [_pod("a", **never), _pod("b"), _pod("c")]
    # ready pods at 60% of a 30% target; with the unready one at 0: 40% -> ceil(1.33 * 3) = 4 (not 6)
    assert CALC.resource_replicas(3, 30, "cpu", up, _samples(a=300, b=500, c=700)) == (4, 60, 600)
    down = [_pod("a"), _pod("b"), _pod("c"), _pod("d", **never), _pod("e", **never)]
    assert CALC.resource_replicas(5, 50, "cpu", down, _samples(a=100, b=300, c=500, d=250, e=250)) == (2, 30, 300)


def test_missing_metrics_are_full_request_or_the_target_above_100_percent_scaling_down_and_zero_scaling_up():
    pods = [_pod("a", cpu="100m"), _pod("b", cpu="100m"), _pod("c", cpu="100m")]
    # 150% of a 200% target, c missing: assumed at max(100, 200)% = 200m -> 500/300 = 166% -> 3, not 2 (at 100%)
    assert CALC.resource_replicas(3, 200, "cpu", pods, _samples(a=150, b=150))[0] == 3
    # at a 50% target: 40% measured, the missing pod at 100% makes 60%: a flip of direction keeps 3
    assert CALC.resource_replicas(3, 50, "cpu", pods, _samples(a=40, b=40))[0] == 3
    # scaling up, the missing pod at 0: (100+100+0)/300 = 66% of 50% -> ceil(1.32 * 3) = 4
    assert CALC.resource_replicas(3, 50, "cpu", pods, _samples(a=100, b=100))[0] == 4


def test_a_cpu_sample_from_before_the_readiness_change_is_ignored_during_initialization():
    young = dict(started=NOW - 60)
    pods = [_pod("a", **young, changed=NOW - 50), _pod("b", **young, changed=NOW - 15)]
    # b turned Ready 15 s ago and its 30 s sample ended 10 s ago: it may predate readiness -> unready (0 when scaling up)
    assert CALC.resource_replicas(2, 100, "cpu", pods, _samples(a=2000, b=2000))[0] == 2
    # a sample taken a full window after the change counts
    fresh = {"a": PodMetric(2000, NOW - 10, 30.0), "b": PodMetric(2000, NOW - 1, 10.0)}
    assert CALC.resource_replicas(2, 100, "cpu", pods, fresh)[0] == 4
    # memory: readiness and sample times do not matter
    mem = [_pod(n, resource="memory", cpu="100Mi", **young, ready=False, changed=NOW - 15) for n in "ab"]
    used = 200 * 2**20 * 1000
    assert CALC.resource_replicas(2, 100, "memory", mem, _samples(a=used, b=used))[0] == 4


def test_past_initialization_only_a_never_ready_pod_is_unready():
    hot = _samples(a=2000, b=2000)
    was_ready = [_pod("a"), _pod("b", ready=False, changed=NOW - 600)]
    assert CALC.resource_replicas(2, 100, "cpu", was_ready, hot)[0] == 4
    never = [_pod("a"), _pod("b", ready=False, changed=NOW - 3590)]  # unready since 10 s after its start
    assert CALC.resource_replicas(2, 100, "cpu", never, hot)[0] == 2
    delayed = Calculator(NOW, initial_readiness_delay=5.0)  # a shorter --horizontal-pod-autoscaler-initial-readiness-delay
    assert delayed.resource_replicas(2, 100, "cpu", never, hot)[0] == 4
    no_condition = [_pod("a"), _pod("b", ready=None)]
    assert CALC.resource_replicas(2, 100, "cpu", no_condition, hot)[0] == 2
    pending = [_pod("a"), _pod("b", phase="Pending")]
    assert CALC.resource_replicas(2, 100, "cpu", pending, hot)[0] == 2
    deleted = [_pod("a"), _pod("b", deletionTimestamp=_at(NOW))]
    assert CALC.resource_replicas(2, 100, "cpu", deleted, hot)[0] == 2


def test_errors_say_what_is_wrong_as_upstream():
    with pytest.raises(MetricError, match="^no pods returned by selector while calculating replica count$"):
        CALC.resource_replicas(1, 50, "cpu", [], {})
    with pytest.raises(MetricError, match=r"^did not receive metrics for targeted pods \(pods might be unready\)$"):
        CALC.resource_replicas(1, 50, "cpu", [_pod("a", ready=None)], _samples(a=10))
    bare = _pod("a")
    bare["spec"]["containers"][0]["resources"] = {}
    with pytest.raises(MetricError, match="^missing request for cpu in container c of Pod a$"):
        CALC.resource_replicas(1, 50, "cpu", [bare], _samples(a=10))


def test_plain_per_pod_metrics_average_and_assume_the_target_for_missing_pods_scaling_down():
    pods = [_pod("a"), _pod("b"), _pod("c")]
    assert CALC.plain_replicas(3, 10_000, pods, _samples(a=20_000, b=20_000, c=20_000)) == (6, 20_000)
    # 5 per pod of a 10 target, c missing (assumed at 10): (5+5+10)/3 = 6.666 -> ceil(0.666 * 3) = 2
    assert CALC.plain_replicas(3, 10_000, pods, _samples(a=5000, b=5000)) == (2, 5000)


def test_object_and_external_metrics_by_value_and_per_replica():
    pods = [_pod("a"), _pod("b")]
    assert CALC.ratio_replicas(2, 3.0, pods) == 6  # value 3x the target, two ready running pods
    assert CALC.ratio_replicas(2, 1.05, pods) == 2
    assert CALC.ratio_replicas(0, 2.5, []) == 3  # from zero: ceil(ratio)
    assert CALC.per_pod_replicas(2, 1000, 6000) == (6, 3000)
    assert CALC.per_pod_replicas(4, 1000, 4100) == (4, 1025)


def test_milli_quantities_print_in_canonical_decimal_form():
    assert [format_milli_quantity(v) for v in (0, 500, 1500, 2000, 3_000_000, 209715200000)] == [
        "0", "500m", "1500m", "2", "3k", "209715200"]


def test_without_behavior_scale_up_is_limited_to_double_or_four_and_scale_down_stabilizes_over_the_flag():
    spec = {"minReplicas": 1, "maxReplicas": 20}
    first = normalize(spec, History(), 0.0, 1, 10, downscale_window=300)
    assert (first.replicas, first.limited, first.limit[0]) == (4, True, "ScaleUpLimit")
    assert normalize(spec, History(), 0.0, 5, 20, downscale_window=300).replicas == 10
    capped = normalize({"maxReplicas": 8}, History(), 0.0, 5, 20, downscale_window=300)
    assert (capped.replicas, capped.limit[0]) == (8, "TooManyReplicas")
    history = History()
    assert normalize(spec, history, 0.0, 5, 5, downscale_window=300).able_to_scale[0] == "ReadyForNewScale"
    held = normalize(spec, history, 10.0, 5, 2, downscale_window=300)
    assert (held.replicas, held.able_to_scale[0]) == (5, "ScaleDownStabilized")
    assert normalize(spec, history, 400.0, 5, 2, downscale_window=300).replicas == 2
    # a v2 HPA with a behavior takes the policies instead: 1 -> 5 (4 pods per 15 s)
    assert normalize({**spec, "behavior": {}}, History(), 0.0, 1, 10, downscale_window=300).replicas == 5
    low = normalize({"minReplicas": 3, "maxReplicas": 10}, History(), 0.0, 5, 1, downscale_window=0)
    assert (low.replicas, low.limit[0]) == (3, "TooFewReplicas")


def test_behavior_windows_and_policies_as_upstream():
    behavior = Behavior({"scaleDown": {"stabilizationWindowSeconds": 60}})
    history = History()
    assert behavior.stabilize(history, 0.0, 5, 5) == 5
    assert behavior.stabilize(history, 10.0, 5, 2) == 5
    assert behavior.stabilize(history, 80.0, 5, 2) == 2
    assert Behavior({}, downscale_window=42).down["stabilizationWindowSeconds"] == 42
    assert Behavior({"scaleUp": {"selectPolicy": "Disabled"}}).bounded(History(), 0.0, 1, 10, 1, 20)[:2] == (1, "ScaleUpLimit")
    # a Percent scale-down truncates: 50% of 5 leaves 2 (not 3)
    half = Behavior({"scaleDown": {"policies": [{"type": "Percent", "value": 50, "periodSeconds": 60}]}})
    assert half.bounded(History(), 0.0, 5, 1, 1, 10)[:2] == (2, "ScaleDownLimit")
    # the period's start counts the scale-downs too: 5 replicas 10 s ago, 3 now, +2 pods per minute -> 7
    history = History(scale_downs=[(0.0, 2)])
    two = Behavior({"scaleUp": {"policies": [{"type": "Pods", "value": 2, "periodSeconds": 60}]}})
    assert two.bounded(history, 10.0, 3, 10, 1, 20)[:2] == (7, "ScaleUpLimit")
    least = Behavior({"scaleUp": {"selectPolicy": "Min"}})  # min(1 + 4, 1 * 200%) = 2
    assert least.bounded(History(), 0.0, 1, 10, 1, 20)[0] == 2
    assert Behavior(None).bounded(History(), 0.0, 5, 4, 1, 10) == (4, "DesiredWithinRange",
                                                                    "the desired count is within the acceptable range")
