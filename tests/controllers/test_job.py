"""The Job controller against a real API server, with the pod driver as kubelet."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from k8py.client.resources import JOBS, PODS
from k8py.controllers.context import ControllerOptions
from tests.controllers.conftest import eventually
from tests.support.kube import Kubectl

FAST = ControllerOptions(extra={"job_pod_failure_backoff": 0.05, "job_pod_failure_backoff_max": 0.2})


def _job(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                                           "containers": [{"name": "main", "image": "busybox"}]}}, **spec}}


def _condition(job: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    for c in (job.get("status") or {}).get("conditions") or ():
        if c["type"] == ctype and c["status"] == "True":
            return c
    return None


async def _get(client, name: str) -> dict[str, Any]:
    return await client.get(JOBS, "default", name)


async def test_a_job_whose_pods_fail_stops_at_the_backoff_limit(client, start_manager, driver) -> None:
    driver.outcome = lambda pod: "Failed"
    await start_manager("job", options=FAST)
    await client.create(JOBS, _job("flaky", backoffLimit=2), namespace="default")

    async def failed():
        job = await _get(client, "flaky")
        return job if _condition(job, "Failed") else None

    job = await eventually(failed)
    assert job["status"]["failed"] == 3  # backoffLimit + 1 pods, each counted once
    assert _condition(job, "FailureTarget")["reason"] == "BackoffLimitExceeded"
    assert _condition(job, "Failed")["message"] == "Job has reached the specified backoff limit"
    assert job["status"]["uncountedTerminatedPods"] == {}
    pods = (await client.list(PODS, "default"))["items"]
    assert len(pods) == 3
    assert all("batch.kubernetes.io/job-tracking" not in (p["metadata"].get("finalizers") or []) for p in pods)
    assert all(p["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "flaky" for p in pods)


async def test_a_job_completes_after_its_completions_with_bounded_parallelism(client, start_manager, driver) -> None:
    driver.outcome = lambda pod: "Succeeded"
    await start_manager("job", options=FAST)
    await client.create(JOBS, _job("batch", completions=4, parallelism=2), namespace="default")

    async def complete():
        job = await _get(client, "batch")
        return job if _condition(job, "Complete") else None

    job = await eventually(complete)
    assert job["status"]["succeeded"] == 4
    assert job["status"].get("failed", 0) == 0
    assert job["status"]["completionTime"]
    assert _condition(job, "SuccessCriteriaMet")["reason"] == "CompletionsReached"
    assert len((await client.list(PODS, "default"))["items"]) == 4


async def test_an_indexed_job_runs_each_index_once_with_its_index(client, start_manager, driver) -> None:
    seen: dict[str, str] = {}

    def outcome(pod: dict[str, Any]) -> str:
        seen[pod["metadata"]["name"]] = pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
        return "Succeeded"

    driver.outcome = outcome
    await start_manager("job", options=FAST)
    await client.create(JOBS, _job("idx", completions=3, parallelism=3, completionMode="Indexed"), namespace="default")

    async def complete():
        job = await _get(client, "idx")
        return job if _condition(job, "Complete") else None

    job = await eventually(complete)
    assert job["status"]["completedIndexes"] == "0-2"
    assert job["status"]["succeeded"] == 3
    pods = (await client.list(PODS, "default"))["items"]
    by_index = {p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]: p for p in pods}
    assert sorted(by_index) == ["0", "1", "2"]
    for index, pod in by_index.items():
        assert pod["metadata"]["name"].startswith(f"idx-{index}-")
        assert pod["spec"]["hostname"] == f"idx-{index}"
        env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
        assert env["JOB_COMPLETION_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"] == \
            "metadata.annotations['batch.kubernetes.io/job-completion-index']"


async def test_backoff_limit_per_index_fails_only_that_index(client, start_manager, driver) -> None:
    def outcome(pod: dict[str, Any]) -> str:
        index = pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
        return "Failed" if index == "1" else "Succeeded"

    driver.outcome = outcome
    await start_manager("job", options=FAST)
    await client.create(JOBS, _job("per", completions=3, parallelism=3, completionMode="Indexed",
                                   backoffLimitPerIndex=1), namespace="default")

    async def failed():
        job = await _get(client, "per")
        return job if _condition(job, "Failed") else None

    job = await eventually(failed)
    assert _condition(job, "Failed")["reason"] == "FailedIndexes"
    assert job["status"]["failedIndexes"] == "1"
    assert job["status"]["completedIndexes"] == "0,2"
    assert job["status"]["failed"] == 2  # index 1 ran twice: once plus one retry


async def test_a_fail_job_rule_fails_the_job_at_the_first_match(client, start_manager, driver) -> None:
    driver.outcome = lambda pod: "Failed"  # exit code 1
    await start_manager("job", options=FAST)
    policy = {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1]}}]}
    await client.create(JOBS, _job("pfp", backoffLimit=5, podFailurePolicy=policy), namespace="default")

    async def failed():
        job = await _get(client, "pfp")
        return job if _condition(job, "Failed") else None

    job = await eventually(failed)
    cond = _condition(job, "Failed")
    assert cond["reason"] == "PodFailurePolicy"
    assert "failed with exit code 1 matching FailJob rule at index 0" in cond["message"]
    assert job["status"]["failed"] == 1


async def test_suspend_deletes_active_pods_and_resume_starts_them_again(client, start_manager, driver) -> None:
    driver.outcome = lambda pod: "Running"
    await start_manager("job", options=FAST)
    await client.create(JOBS, _job("sus", parallelism=2, completions=2), namespace="default")
    await eventually(lambda: _active(client, "sus", 2))
    await client.patch(JOBS, "default", "sus", {"spec": {"suspend": True}})

    async def suspended():
        job = await _get(client, "sus")
        pods = [p for p in (await client.list(PODS, "default"))["items"] if not p["metadata"].get("deletionTimestamp")]
        return job if _condition(job, "Suspended") and not pods and job["status"].get("active", 0) == 0 else None

    job = await eventually(suspended)
    assert _condition(job, "Suspended")["reason"] == "JobSuspended"
    await client.patch(JOBS, "default", "sus", {"spec": {"suspend": False}})
    await eventually(lambda: _active(client, "sus", 2))
    job = await _get(client, "sus")
    assert any(c["type"] == "Suspended" and c["status"] == "False" and c["reason"] == "JobResumed"
               for c in job["status"]["conditions"])


async def test_active_deadline_fails_a_running_job(client, start_manager, driver) -> None:
    driver.outcome = lambda pod: "Running"
    await start_manager("job", options=FAST)
    await client.create(JOBS, _job("slow", activeDeadlineSeconds=1), namespace="default")

    async def failed():
        job = await _get(client, "slow")
        return job if _condition(job, "Failed") else None

    job = await eventually(failed)
    assert _condition(job, "Failed")["reason"] == "DeadlineExceeded"


async def _active(client, name: str, n: int) -> bool:
    job = await _get(client, name)
    return (job.get("status") or {}).get("active", 0) == n


@pytest.mark.kubectl
async def test_kubectl_create_job_wait_and_get(client, server, start_manager, driver, tmp_path) -> None:
    driver.outcome = lambda pod: "Succeeded"
    await start_manager("job")
    k = Kubectl(server.url, str(tmp_path / "home"))
    await asyncio.to_thread(k.run, "create", "job", "pi", "--image=busybox")
    out = await asyncio.to_thread(k.run, "wait", "--for=condition=complete", "job/pi", "--timeout=60s")
    assert out.stdout == "job.batch/pi condition met\n"
    rows = (await asyncio.to_thread(k.run, "get", "job", "pi")).stdout.splitlines()
    assert rows[0].split() == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    assert rows[1].split()[:3] == ["pi", "Complete", "1/1"]
    pods = (await asyncio.to_thread(k.run, "get", "pods", "-l", "job-name=pi", "-o", "name")).stdout.split()
    assert len(pods) == 1


async def test_a_success_policy_completes_an_indexed_job_and_stops_the_rest(client, start_manager, driver) -> None:
    def outcome(pod: dict[str, Any]) -> str:
        index = pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
        return "Succeeded" if index == "1" else "Running"

    driver.outcome = outcome
    await start_manager("job", options=FAST)
    policy = {"rules": [{"succeededIndexes": "0", "succeededCount": 1}, {"succeededIndexes": "1-2", "succeededCount": 1}]}
    await client.create(JOBS, _job("leader", completions=3, parallelism=3, completionMode="Indexed",
                                   successPolicy=policy), namespace="default")

    async def complete():
        job = await _get(client, "leader")
        return job if _condition(job, "Complete") else None

    job = await eventually(complete)
    assert _condition(job, "SuccessCriteriaMet")["reason"] == "SuccessPolicy"
    assert _condition(job, "Complete")["message"] == "Matched rules at index 1"
    assert job["status"]["completedIndexes"] == "1"
    assert job["status"].get("failed", 0) == 0  # the lingering pods were stopped, not failed
    pods = (await client.list(PODS, "default"))["items"]
    assert all(p["metadata"].get("deletionTimestamp") or p["status"]["phase"] == "Succeeded" for p in pods)


async def test_deleting_a_job_releases_its_pods_in_background_and_foreground_mode(client, start_manager, driver) -> None:
    driver.outcome = lambda pod: "Running"
    await start_manager("job", "garbagecollector", options=FAST)
    for name in ("bg", "fg"):
        await client.create(JOBS, _job(name, parallelism=2, completions=2), namespace="default")
        await eventually(lambda: _active(client, name, 2))
    await client.delete(JOBS, "default", "bg", propagation_policy="Background")
    await client.delete(JOBS, "default", "fg", propagation_policy="Foreground")

    async def all_gone() -> bool:
        pods = (await client.list(PODS, "default"))["items"]
        jobs = (await client.list(JOBS, "default"))["items"]
        return not pods and not jobs

    await eventually(all_gone)  # no pod is left holding the job-tracking finalizer


async def test_lowering_parallelism_deletes_the_surplus_pods(client, start_manager, driver) -> None:
    driver.outcome = lambda pod: "Running"
    await start_manager("job", options=FAST)
    await client.create(JOBS, _job("wide", parallelism=3, completions=10), namespace="default")
    await eventually(lambda: _active(client, "wide", 3))
    await client.patch(JOBS, "default", "wide", {"spec": {"parallelism": 1}})
    await eventually(lambda: _active(client, "wide", 1))

    async def one_live_pod() -> bool:
        pods = (await client.list(PODS, "default"))["items"]
        return len([p for p in pods if not p["metadata"].get("deletionTimestamp")]) == 1

    await eventually(one_live_pod)
    # a pod deleted before it succeeded counts as failed (upstream isPodFailed), even when
    # the controller removed it
    async def failed_two() -> bool:
        return (await _get(client, "wide"))["status"].get("failed") == 2

    await eventually(failed_two)


async def test_replacement_policy_failed_waits_for_a_terminating_pod_to_fail(client, start_manager) -> None:
    from tests.controllers.conftest import running
    from tests.support.pod_driver import PodDriver

    bound = PodDriver(client, node_name="n1", outcome=lambda pod: "Running")
    async with running(bound.run(), "bound-pod-driver"):
        await start_manager("job", options=FAST)
        await client.create(JOBS, _job("patient", podReplacementPolicy="Failed"), namespace="default")
        await eventually(lambda: _active(client, "patient", 1))
        [pod] = (await client.list(PODS, "default"))["items"]
        await client.delete(PODS, "default", pod["metadata"]["name"])  # bound: deleted gracefully

        async def terminating() -> dict[str, Any] | None:
            job = await _get(client, "patient")
            return job if job["status"].get("terminating") == 1 and job["status"].get("active", 0) == 0 else None

        await eventually(terminating)
        assert len((await client.list(PODS, "default"))["items"]) == 1  # no replacement yet
        dying = await client.get(PODS, "default", pod["metadata"]["name"])
        dying["status"]["phase"] = "Failed"
        await client.update_status(PODS, dying)
        await eventually(lambda: _active(client, "patient", 1))
        job = await _get(client, "patient")
        assert job["status"]["failed"] == 1 and job["status"].get("terminating", 0) == 0
