"""Pure logic of the batch controllers: indexes, pod failure policy, backoff,
DaemonSet eligibility, StatefulSet ordinals and ControllerRevision history."""

from __future__ import annotations

from k8py.controllers.daemonset.eligibility import node_should_run_daemon_pod, pin_to_node
from k8py.controllers.history import (
    equal_revisions, new_revision, next_revision_number, revision_hash, revisions_to_trim, template_patch,
)
from k8py.controllers.job.backoff import BackoffRecord, remaining_backoff
from k8py.controllers.job.indexes import first_pending_indexes, format_intervals, parse_intervals, pod_index
from k8py.controllers.job.pod_failure_policy import match_pod_failure_policy
from k8py.controllers.statefulset.ordinals import ordinal_of, split_pods


# --- Job: indexes ---------------------------------------------------------------

def test_intervals_round_trip_compressed_and_sorted() -> None:
    assert format_intervals([7, 1, 3, 4, 5]) == "1,3-5,7"
    assert format_intervals([]) == ""
    assert parse_intervals("1,3-5,7", 10) == {1, 3, 4, 5, 7}
    assert parse_intervals("1,3-5,7", 5) == {1, 3, 4}


def test_pod_index_rejects_malformed_and_out_of_range_annotations() -> None:
    def pod(value: str) -> dict:
        return {"metadata": {"annotations": {"batch.kubernetes.io/job-completion-index": value}}}
    assert pod_index(pod("2"), 3) == 2
    assert pod_index(pod("3"), 3) is None
    assert pod_index(pod("01"), 3) is None
    assert pod_index(pod("x"), 3) is None
    assert pod_index({"metadata": {}}, 3) is None


def test_first_pending_indexes_skip_done_and_active() -> None:
    assert first_pending_indexes(6, {0, 2}, {1}, 2) == [3, 4]
    assert first_pending_indexes(3, {0, 1, 2}, set(), 5) == []


# --- Job: pod failure policy ------------------------------------------------------

def _failed_pod(exit_code: int, *, conditions: list | None = None) -> dict:
    return {"metadata": {"namespace": "ns", "name": "p"},
            "status": {"phase": "Failed", "conditions": conditions or [],
                       "containerStatuses": [{"name": "main", "state": {"terminated": {"exitCode": exit_code}}}]}}


POLICY = {"rules": [
    {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}},
    {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
    {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [1]}},
]}


def test_fail_job_rule_carries_upstreams_message() -> None:
    m = match_pod_failure_policy(POLICY, _failed_pod(42))
    assert m.action == "FailJob"
    assert m.message == "Container main for pod ns/p failed with exit code 42 matching FailJob rule at index 0"


def test_ignore_rule_does_not_count_and_first_match_wins() -> None:
    disrupted = _failed_pod(1, conditions=[{"type": "DisruptionTarget", "status": "True"}])
    m = match_pod_failure_policy(POLICY, disrupted)
    assert (m.action, m.counts) == ("Ignore", False)
    assert match_pod_failure_policy(POLICY, _failed_pod(3)).action == "Count"
    unmatched = match_pod_failure_policy(POLICY, _failed_pod(1))
    assert (unmatched.action, unmatched.counts) == (None, True)


def test_only_failed_pods_are_matched() -> None:
    pod = _failed_pod(42)
    pod["status"]["phase"] = "Running"
    assert match_pod_failure_policy(POLICY, pod).action is None


# --- Job: backoff -----------------------------------------------------------------

def test_backoff_doubles_per_failure_caps_and_resets_on_success() -> None:
    record = BackoffRecord()
    assert remaining_backoff(record, 100.0, base=10, cap=60) == 0
    record.record(new_failures=1, new_successes=0, now=100.0)
    assert remaining_backoff(record, 100.0, base=10, cap=60) == 10
    record.record(new_failures=2, new_successes=0, now=105.0)
    assert remaining_backoff(record, 105.0, base=10, cap=60) == 40
    record.record(new_failures=5, new_successes=0, now=110.0)
    assert remaining_backoff(record, 110.0, base=10, cap=60) == 60
    record.record(new_failures=0, new_successes=1, now=111.0)
    assert remaining_backoff(record, 111.0, base=10, cap=60) == 0


# --- DaemonSet: eligibility -------------------------------------------------------

def _node(name: str, labels: dict | None = None, taints: list | None = None) -> dict:
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": {"taints": taints or []}}


def test_node_selector_and_required_affinity_decide_eligibility() -> None:
    spec = {"nodeSelector": {"disk": "ssd"}}
    assert node_should_run_daemon_pod(spec, _node("a", {"disk": "ssd"})).should_run
    assert not node_should_run_daemon_pod(spec, _node("b", {"disk": "hdd"})).should_run
    affinity = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]},
                              {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["c"]}]}]}}}}
    assert node_should_run_daemon_pod(affinity, _node("a", {"zone": "z1"})).should_run
    assert node_should_run_daemon_pod(affinity, _node("c")).should_run
    assert not node_should_run_daemon_pod(affinity, _node("d", {"zone": "z2"})).should_run


def test_taints_noschedule_stops_new_pods_but_noexecute_evicts() -> None:
    no_schedule = _node("a", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
    e = node_should_run_daemon_pod({}, no_schedule)
    assert (e.should_run, e.should_continue_running) == (False, True)
    no_execute = _node("a", taints=[{"key": "dedicated", "effect": "NoExecute"}])
    e = node_should_run_daemon_pod({}, no_execute)
    assert (e.should_run, e.should_continue_running) == (False, False)
    tolerated = {"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]}
    assert node_should_run_daemon_pod(tolerated, no_schedule).should_run


def test_daemon_tolerations_cover_the_node_condition_taints() -> None:
    for key, effect in [("node.kubernetes.io/unschedulable", "NoSchedule"),
                        ("node.kubernetes.io/not-ready", "NoExecute"),
                        ("node.kubernetes.io/memory-pressure", "NoSchedule")]:
        assert node_should_run_daemon_pod({}, _node("a", taints=[{"key": key, "effect": effect}])).should_run
    net = _node("a", taints=[{"key": "node.kubernetes.io/network-unavailable", "effect": "NoSchedule"}])
    assert not node_should_run_daemon_pod({}, net).should_run
    assert node_should_run_daemon_pod({"hostNetwork": True}, net).should_run


def test_pinning_replaces_required_affinity_with_the_node_name() -> None:
    spec: dict = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "x", "operator": "Exists"}]}]}}}}
    pin_to_node(spec, "n1")
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]


# --- StatefulSet: ordinals --------------------------------------------------------

def test_ordinals_and_condemned_pods_highest_first() -> None:
    pods = [{"metadata": {"name": n}} for n in ("web-0", "web-1", "web-4", "web-3", "webby-1", "other")]
    assert ordinal_of(pods[0], "web") == 0
    assert ordinal_of(pods[4], "web") is None
    in_range, condemned = split_pods(pods, "web", 0, 3)
    assert sorted(in_range) == [0, 1]
    assert [p["metadata"]["name"] for p in condemned] == ["web-4", "web-3"]


# --- ControllerRevision history ---------------------------------------------------

def _sts(image: str) -> dict:
    return {"metadata": {"name": "web", "namespace": "ns", "uid": "u1"},
            "spec": {"template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": image}]}}}}


def test_revision_data_replaces_the_template_and_hash_names_it() -> None:
    rev = new_revision(_sts("nginx:1"), kind="StatefulSet", revision=1, collision_count=None)
    assert rev["data"] == {"spec": {"template": {**_sts("nginx:1")["spec"]["template"], "$patch": "replace"}}}
    digest = rev["metadata"]["labels"]["controller-revision-hash"]
    assert rev["metadata"]["name"] == f"web-{digest}"
    assert rev["metadata"]["labels"]["app"] == "web"
    assert rev["metadata"]["ownerReferences"][0]["controller"] is True
    assert set(digest) <= set("bcdfghjklmnpqrstvwxz2456789")
    assert revision_hash(template_patch(_sts("nginx:1")), 1) != digest
    assert new_revision(_sts("nginx:2"), kind="StatefulSet", revision=2, collision_count=None)["metadata"]["name"] != rev["metadata"]["name"]


def test_equal_revisions_numbers_and_trimming() -> None:
    r1 = new_revision(_sts("a"), kind="StatefulSet", revision=1, collision_count=None)
    r2 = new_revision(_sts("b"), kind="StatefulSet", revision=2, collision_count=None)
    r3 = new_revision(_sts("c"), kind="StatefulSet", revision=3, collision_count=None)
    assert equal_revisions([r1, r2, r3], new_revision(_sts("b"), kind="StatefulSet", revision=9,
                                                       collision_count=None)) == [r2]
    assert next_revision_number([r1, r3, r2]) == 4
    live = {r3["metadata"]["labels"]["controller-revision-hash"]}
    assert revisions_to_trim([r1, r2, r3], limit=1, live_hashes=live, live_names=set()) == [r1]
    assert revisions_to_trim([r1, r2, r3], limit=5, live_hashes=live, live_names=set()) == []


def test_trimming_never_removes_a_live_revision() -> None:
    r1 = new_revision(_sts("a"), kind="DaemonSet", revision=1, collision_count=None)
    assert revisions_to_trim([r1], limit=0, live_hashes=set(), live_names={r1["metadata"]["name"]}) == []


# --- DaemonSet: the rolling update plan ------------------------------------------

def _dpod(name: str, hash_: str) -> dict:
    return {"metadata": {"name": name, "labels": {"controller-revision-hash": hash_}}}


def _names(pods: list) -> list[str]:
    return [p["metadata"]["name"] for p in pods]


def test_rolling_update_without_surge_deletes_within_max_unavailable() -> None:
    from k8py.controllers.daemonset.rolling_update import plan_rolling_update

    pods = {f"n{i}": [_dpod(f"old{i}", "a")] for i in range(4)}
    up = lambda p: True  # noqa: E731
    assert _names(plan_rolling_update(list(pods), pods, "b", rolling={"maxUnavailable": 1}, available=up).delete) == ["old0"]
    assert len(plan_rolling_update(list(pods), pods, "b", rolling={"maxUnavailable": "50%"}, available=up).delete) == 2
    # a node already without an available pod uses the budget up
    starting = {**pods, "n0": [_dpod("new0", "b")]}
    ready = lambda p: p["metadata"]["name"] != "new0"  # noqa: E731
    assert plan_rolling_update(list(pods), starting, "b", rolling={"maxUnavailable": 1}, available=ready).delete == []
    # an old pod that is not available anyway goes at once, budget or not
    broken = lambda p: p["metadata"]["name"] not in ("new0", "old3")  # noqa: E731
    assert _names(plan_rolling_update(list(pods), starting, "b", rolling={"maxUnavailable": 1}, available=broken).delete) == ["old3"]


def test_rolling_update_with_surge_starts_new_pods_beside_old_ones() -> None:
    from k8py.controllers.daemonset.rolling_update import plan_rolling_update

    pods = {f"n{i}": [_dpod(f"old{i}", "a")] for i in range(3)}
    plan = plan_rolling_update(list(pods), pods, "b", rolling={"maxSurge": 1, "maxUnavailable": 0}, available=lambda p: True)
    assert (plan.create_on, plan.delete) == (["n0"], [])
    surging = {**pods, "n0": [_dpod("old0", "a"), _dpod("new0", "b")]}
    waiting = plan_rolling_update(list(pods), surging, "b", rolling={"maxSurge": 1, "maxUnavailable": 0},
                                  available=lambda p: p["metadata"]["name"] != "new0")
    assert (waiting.create_on, waiting.delete) == ([], [])  # the surge budget is in use
    done = plan_rolling_update(list(pods), surging, "b", rolling={"maxSurge": 1, "maxUnavailable": 0},
                               available=lambda p: True)
    assert _names(done.delete) == ["old0"] and done.create_on == ["n1"]  # the budget moves on at once
