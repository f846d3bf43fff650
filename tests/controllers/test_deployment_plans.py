"""The Deployment controller's pure parts: fenceposts, plans, conditions, revisions."""

from __future__ import annotations

from datetime import timedelta

from k8py.client.clock import FakeClock
from k8py.controllers.deployment import conditions as cond
from k8py.controllers.deployment import replica_sets as rsutil
from k8py.controllers.deployment.scaling import new_rs_new_replicas, old_rs_scale_down_plan, proportional_plan
from k8py.controllers.pod_status import format_time


def dep(replicas: int, surge="25%", unavailable="25%", **spec) -> dict:
    return {"metadata": {"name": "d", "generation": 1},
            "spec": {"replicas": replicas, "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}},
                     "template": {"metadata": {"labels": {"app": "d"}}, "spec": {}}, **spec}}


def rs(name: str, replicas: int, *, available: int = 0, status_replicas: int | None = None, created: str = "2025-01-01T00:00:00Z",
       max_replicas: int | None = None) -> dict:
    annotations = {} if max_replicas is None else {rsutil.MAX_REPLICAS_ANNOTATION: str(max_replicas)}
    return {"metadata": {"name": name, "creationTimestamp": created, "annotations": annotations},
            "spec": {"replicas": replicas},
            "status": {"replicas": replicas if status_replicas is None else status_replicas, "availableReplicas": available}}


def test_percentages_round_surge_up_and_unavailability_down():
    assert rsutil.resolve_fenceposts(dep(10)) == (3, 2)
    assert rsutil.resolve_fenceposts(dep(1, 0, 0)) == (0, 1)
    assert rsutil.max_unavailable(dep(2, 0, 5)) == 2
    assert rsutil.max_surge({**dep(3), "spec": {**dep(3)["spec"], "strategy": {"type": "Recreate"}}}) == 0


def test_the_new_replica_set_grows_only_within_the_surge():
    d = dep(4, 1, 1)
    old, new = rs("old", 4, available=4), rs("new", 0)
    assert new_rs_new_replicas(d, [old, new], new) == 1
    # an old ReplicaSet scaled down whose pods are not gone yet still counts
    old = rs("old", 3, available=3, status_replicas=4)
    new = rs("new", 1)
    assert new_rs_new_replicas(d, [old, new], new) == 1


def test_old_replica_sets_shrink_only_as_far_as_availability_allows():
    d = dep(4, 1, 1)
    old, new = rs("old", 4, available=4), rs("new", 1, available=0)
    assert [(r["metadata"]["name"], n) for r, n in old_rs_scale_down_plan(d, [old], [old, new])] == [("old", 3)]
    # a status not caught up with a scale-down does not count the pods being removed
    old = rs("old", 3, available=4)
    assert old_rs_scale_down_plan(d, [old], [old, new]) == []


def test_proportional_scaling_splits_by_size_and_gives_the_leftover_to_the_largest():
    d = dep(20, 3, 2)
    old = rs("old", 8, max_replicas=13, created="2025-01-01T00:00:00Z")
    new = rs("new", 5, max_replicas=13, created="2025-01-02T00:00:00Z")
    assert [(r["metadata"]["name"], n) for r, n in proportional_plan(d, new, [old])] == [("old", 14), ("new", 9)]
    d = dep(5, 3, 2)  # scaling down: 13 -> 8
    plan = dict((r["metadata"]["name"], n) for r, n in proportional_plan(d, new, [old]))
    assert sum(plan.values()) == 8 and plan["old"] >= plan["new"]


def test_a_progressing_condition_past_its_deadline_times_out_on_the_clock():
    clock = FakeClock()
    d = dep(1, progressDeadlineSeconds=60)
    status = {"conditions": [cond.new_condition(cond.PROGRESSING, "True", cond.RS_UPDATED_REASON, "x", clock.now())]}
    clock.advance(60)
    assert not cond.deployment_timed_out(d, status, clock.now())
    clock.advance(1)
    assert cond.deployment_timed_out(d, status, clock.now())
    status["conditions"][0]["reason"] = cond.NEW_RS_AVAILABLE_REASON
    assert not cond.deployment_timed_out(d, status, clock.now())


def test_set_condition_keeps_the_transition_time_while_the_status_holds():
    clock = FakeClock()
    status: dict = {}
    cond.set_condition(status, cond.new_condition(cond.AVAILABLE, "True", "A", "a", clock.now()))
    first = status["conditions"][0]["lastTransitionTime"]
    clock.advance(120)
    cond.set_condition(status, cond.new_condition(cond.AVAILABLE, "True", "B", "b", clock.now()))
    assert status["conditions"][0]["reason"] == "B" and status["conditions"][0]["lastTransitionTime"] == first
    cond.set_condition(status, cond.new_condition(cond.AVAILABLE, "False", "C", "c", clock.now()))
    assert status["conditions"][0]["lastTransitionTime"] == format_time(clock.now())


def test_a_replica_set_made_new_again_keeps_its_old_revisions():
    d = dep(1)
    again = {"metadata": {"annotations": {rsutil.REVISION_ANNOTATION: "1"}}}
    assert rsutil.set_new_replica_set_annotations(d, again, 3, True)
    assert again["metadata"]["annotations"][rsutil.REVISION_ANNOTATION] == "3"
    assert again["metadata"]["annotations"][rsutil.REVISION_HISTORY_ANNOTATION] == "1"


def test_templates_equal_ignoring_the_hash_label_and_the_hash_is_stable():
    t = {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    hashed = {"metadata": {"labels": {"app": "d", "pod-template-hash": "abc"}}, "spec": t["spec"]}
    assert rsutil.equal_ignore_hash(t, hashed)
    assert rsutil.template_hash(t, None) == rsutil.template_hash(dict(t), None) != rsutil.template_hash(t, 1)
    assert set(rsutil.template_hash(t, None)) <= set("bcdfghjklmnpqrstvwxz2456789")


def test_equal_ignore_hash_says_what_comparing_hashless_copies_says():
    spec = {"containers": [{"name": "c", "image": "i"}]}
    variants = [
        {}, {"spec": spec}, {"metadata": {}, "spec": spec}, {"metadata": {"labels": {}}, "spec": spec},
        {"metadata": {"labels": {"app": "d"}}, "spec": spec},
        {"metadata": {"labels": {"app": "d", "pod-template-hash": "abc"}}, "spec": spec},
        {"metadata": {"labels": {"pod-template-hash": "abc"}}, "spec": spec},
        {"metadata": {"labels": {"app": "e", "pod-template-hash": "abc"}}, "spec": spec},
        {"metadata": {"labels": {"app": "d"}, "annotations": {"a": "1"}}, "spec": spec},
        {"metadata": {"labels": {"app": "d", "x": "y"}}, "spec": spec},
        {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "j"}]}},
        {"metadata": {"labels": {"app": "d"}}},
    ]
    for a in variants:
        for b in variants:
            want = rsutil.template_without_hash(a) == rsutil.template_without_hash(b)
            assert rsutil.equal_ignore_hash(a, b) == want, (a, b)
