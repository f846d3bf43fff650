"""Job ``sync`` on hand-filled listers with a fake clock (no informers running),
writes going to a real API server: backoff, deadlines and restarts, exactly."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from k8py.client.clock import FakeClock
from k8py.client.event_recorder import EventBroadcaster
from k8py.client.informer_factory import InformerFactory
from k8py.client.resources import JOBS, PODS
from k8py.controllers.context import ControllerContext
from k8py.controllers.job import JobController
from k8py.controllers.job.tracking import tally_finished_pods
from tests.controllers.test_job import _condition, _job


@pytest.fixture
async def controller(client):
    clock = FakeClock(start=datetime.now(timezone.utc))
    ctx = ControllerContext(client=client, informers=InformerFactory(client),
                            broadcaster=EventBroadcaster(client, clock=clock), clock=clock)
    return JobController(ctx)


async def _refresh(controller, client, name: str) -> dict[str, Any]:
    job = await client.get(JOBS, "default", name)
    controller.jobs.indexer.update(job) if controller.jobs.indexer.get_by_key(f"default/{name}") else \
        controller.jobs.indexer.add(job)
    pods = (await client.list(PODS, "default"))["items"]
    for key in list(controller.pods.indexer.list_keys()):
        controller.pods.indexer.delete(controller.pods.indexer.get_by_key(key))
    for pod in pods:
        controller.pods.indexer.add(pod)
        controller.expectations.creation_observed(f"default/{name}")
    return job


async def _fail_all(client, *, exit_code: int = 1, restarts: int = 0, phase: str = "Failed") -> None:
    for pod in (await client.list(PODS, "default"))["items"]:
        if (pod.get("status") or {}).get("phase") in ("Failed", "Succeeded"):
            continue
        state = {"terminated": {"exitCode": exit_code}} if phase == "Failed" else {"running": {}}
        pod["status"] = {"phase": phase, "containerStatuses": [
            {"name": "main", "restartCount": restarts, "state": state}]}
        await client.update_status(PODS, pod)


async def _pod_count(client) -> int:
    return len((await client.list(PODS, "default"))["items"])


async def test_replacements_wait_ten_then_twenty_seconds_after_failures(client, controller) -> None:
    await client.create(JOBS, _job("retry", backoffLimit=5), namespace="default")
    await _refresh(controller, client, "retry")
    assert await controller.sync("default/retry") is None
    assert await _pod_count(client) == 1
    await _fail_all(client)
    await _refresh(controller, client, "retry")
    assert await controller.sync("default/retry") == pytest.approx(10.0)
    await _refresh(controller, client, "retry")
    assert await controller.sync("default/retry") == pytest.approx(10.0)
    assert await _pod_count(client) == 1  # no replacement during the backoff
    controller.clock.advance(10)
    await _refresh(controller, client, "retry")
    await controller.sync("default/retry")
    assert await _pod_count(client) == 2
    await _fail_all(client)
    await _refresh(controller, client, "retry")
    assert await controller.sync("default/retry") == pytest.approx(20.0)
    job = await client.get(JOBS, "default", "retry")
    assert job["status"]["failed"] == 2
    assert all("batch.kubernetes.io/job-tracking" not in (p["metadata"].get("finalizers") or [])
               for p in (await client.list(PODS, "default"))["items"])


async def test_active_deadline_counts_on_the_controllers_clock(client, controller) -> None:
    await client.create(JOBS, _job("deadline", activeDeadlineSeconds=30), namespace="default")
    await _refresh(controller, client, "deadline")
    assert await controller.sync("default/deadline") == pytest.approx(30.0, abs=1.0)
    controller.clock.advance(31)
    await _refresh(controller, client, "deadline")
    await controller.sync("default/deadline")
    job = await client.get(JOBS, "default", "deadline")
    assert _condition(job, "FailureTarget")["reason"] == "DeadlineExceeded"
    pods = (await client.list(PODS, "default"))["items"]
    assert pods and all(p["metadata"].get("deletionTimestamp") for p in pods)  # the running pod is stopped


async def test_on_failure_restarts_count_against_the_backoff_limit(client, controller) -> None:
    job = _job("restarts", backoffLimit=3)
    job["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    await client.create(JOBS, job, namespace="default")
    await _refresh(controller, client, "restarts")
    await controller.sync("default/restarts")
    await _fail_all(client, phase="Running", restarts=2)
    await _refresh(controller, client, "restarts")
    await controller.sync("default/restarts")
    assert _condition(await client.get(JOBS, "default", "restarts"), "FailureTarget") is None
    await _fail_all(client, phase="Running", restarts=3)
    await _refresh(controller, client, "restarts")
    await controller.sync("default/restarts")
    assert _condition(await client.get(JOBS, "default", "restarts"), "FailureTarget")["reason"] == "BackoffLimitExceeded"


def _pod(uid: str, phase: str, *, exit_code: int = 1, index: int | None = None, deleting: bool = False,
         conditions: list | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": uid, "namespace": "default", "uid": uid,
                            "finalizers": ["batch.kubernetes.io/job-tracking"]}
    if index is not None:
        meta["annotations"] = {"batch.kubernetes.io/job-completion-index": str(index)}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "status": {"phase": phase, "conditions": conditions or [], "containerStatuses": [
        {"name": "main", "state": {"terminated": {"exitCode": exit_code}} if phase == "Failed" else {"running": {}}}]}}


def test_tally_counts_each_finished_pod_once_and_ignores_what_the_policy_ignores() -> None:
    spec = {"podFailurePolicy": {"rules": [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}}
    pods = [_pod("a", "Succeeded"), _pod("b", "Failed"), _pod("c", "Running"),
            _pod("d", "Failed", conditions=[{"type": "DisruptionTarget", "status": "True"}]),
            _pod("e", "Failed")]
    tally = tally_finished_pods(spec, {"uncountedTerminatedPods": {"failed": ["e"]}}, pods)
    assert tally.uncounted_succeeded == ["a"]
    assert tally.uncounted_failed == ["e", "b"]  # e was already listed: released again, not recounted
    assert (tally.new_successes, tally.new_failures) == (1, 1)
    assert {p["metadata"]["uid"] for p in tally.to_release} == {"a", "b", "d", "e"}


def test_tally_fails_an_index_past_its_per_index_limit() -> None:
    spec = {"completionMode": "Indexed", "completions": 3, "backoffLimitPerIndex": 1}
    first = _pod("x", "Failed", index=2)
    second = _pod("y", "Failed", index=2)
    second["metadata"]["annotations"]["batch.kubernetes.io/job-index-failure-count"] = "1"
    assert tally_finished_pods(spec, {}, [first]).failed_indexes == set()
    assert tally_finished_pods(spec, {}, [second]).failed_indexes == {2}


def test_a_deleted_running_pod_counts_as_failed_unless_the_job_waits_for_failed_phase() -> None:
    pod = _pod("z", "Running", deleting=True)
    assert tally_finished_pods({}, {}, [pod]).uncounted_failed == ["z"]
    assert tally_finished_pods({"podReplacementPolicy": "Failed"}, {}, [pod]).uncounted_failed == []
    succeeded = {"conditions": [{"type": "SuccessCriteriaMet", "status": "True"}]}
    tally = tally_finished_pods({}, succeeded, [pod])
    assert tally.uncounted_failed == [] and tally.to_release == [pod]


def test_verdicts_follow_upstreams_order_and_rules() -> None:
    from datetime import timedelta

    from k8py.controllers.job.verdicts import failure_verdict, success_policy_rule, success_verdict

    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    started = {"status": {"startTime": (now - timedelta(seconds=60)).strftime("%Y-%m-%dT%H:%M:%SZ")}}
    job = {"spec": {"backoffLimit": 2, "activeDeadlineSeconds": 30}, **started}
    assert failure_verdict(job, 3, set(), set(), [], now).reason == "BackoffLimitExceeded"  # before the deadline
    assert failure_verdict(job, 2, set(), set(), [], now).reason == "DeadlineExceeded"
    per_index = {"spec": {"completionMode": "Indexed", "completions": 4, "backoffLimitPerIndex": 0,
                          "maxFailedIndexes": 1}, "status": {}}
    assert failure_verdict(per_index, 9, {1}, {0}, [], now) is None  # indexes 2 and 3 may still run
    assert failure_verdict(per_index, 9, {1, 2}, set(), [], now).reason == "MaxFailedIndexesExceeded"
    assert failure_verdict(per_index, 9, {1}, {0, 2, 3}, [], now).reason == "FailedIndexes"
    policy = {"completionMode": "Indexed", "completions": 5, "successPolicy": {"rules": [
        {"succeededIndexes": "0-1"}, {"succeededCount": 3}]}}
    assert success_policy_rule(policy, {0}) is None
    assert success_policy_rule(policy, {0, 1}) == 0
    assert success_policy_rule(policy, {2, 3, 4}) == 1
    assert success_verdict({"completions": None}, 1, set(), [{"running": True}]) is None  # work queue: wait
    assert success_verdict({"completions": None}, 1, set(), []).reason == "CompletionsReached"
