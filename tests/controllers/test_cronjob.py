"""The CronJob and TTL-after-finished controllers against a real API server, on a
fake clock (time moves only when the test says so; no test waits a minute)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from k8py.client.clock import FakeClock
from k8py.client.resources import CORE_EVENTS, EVENTS, JOBS
from k8py.controllers.cronjob.controller import CRONJOBS
from tests.controllers.conftest import eventually


def _cron_job(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name},
            "spec": {"schedule": "* * * * *", "jobTemplate": {"metadata": {"labels": {"cron": name}}, "spec": {
                "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}},
                **spec}}


def _clock_after(obj: dict[str, Any]) -> FakeClock:
    """A fake clock a second past the object's creation (the server's clock), so
    the first slot it computes is one the CronJob was created before."""
    created = datetime.fromisoformat(obj["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
    return FakeClock(start=max(created, datetime.now(timezone.utc).replace(microsecond=0)) + timedelta(seconds=1))


def _slot_name(name: str, t: datetime) -> str:
    return f"{name}-{int(t.timestamp()) // 60}"


async def _job_names(client) -> set[str]:
    return {j["metadata"]["name"] for j in (await client.list(JOBS, "default"))["items"]}


async def _event_reasons(client) -> list[str]:
    reasons = [e.get("reason") for e in (await client.list(CORE_EVENTS, "default"))["items"]]
    return reasons + [e.get("reason") for e in (await client.list(EVENTS, "default"))["items"]]


async def _complete(client, name: str, when: datetime) -> None:
    job = await client.get(JOBS, "default", name)
    stamp = when.strftime("%Y-%m-%dT%H:%M:%SZ")
    job["status"] = {"startTime": stamp, "completionTime": stamp, "succeeded": 1, "conditions": [
        {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached", "lastTransitionTime": stamp},
        {"type": "Complete", "status": "True", "reason": "CompletionsReached", "lastTransitionTime": stamp}]}
    await client.update_status(JOBS, job)


async def test_forbid_skips_a_slot_while_a_job_is_active(client, start_manager) -> None:
    created = await client.create(CRONJOBS, _cron_job("tick", concurrencyPolicy="Forbid", timeZone="Europe/Paris",
                                                      startingDeadlineSeconds=30), namespace="default")
    clock = _clock_after(created)
    await start_manager("cronjob", clock=clock)
    first = (clock.now() + timedelta(minutes=1)).replace(second=0)
    await clock.step((first - clock.now()).total_seconds() + 1)
    name1 = _slot_name("tick", first)
    await eventually(lambda: _has(client, name1))
    job = await client.get(JOBS, "default", name1)
    assert job["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"] == \
        first.astimezone(__import__("zoneinfo").ZoneInfo("Europe/Paris")).isoformat()
    assert job["metadata"]["labels"]["cron"] == "tick"
    assert job["metadata"]["ownerReferences"][0]["kind"] == "CronJob"

    async def active_is(n: int):
        cj = await client.get(CRONJOBS, "default", "tick")
        return cj if len((cj.get("status") or {}).get("active") or []) == n else None

    cj = await eventually(lambda: active_is(1))
    assert cj["status"]["lastScheduleTime"] == first.strftime("%Y-%m-%dT%H:%M:%SZ")

    # the next slot comes while the first Job still runs: skipped
    await clock.step(60)
    await eventually(lambda: _reason_seen(client, "JobAlreadyActive"))
    assert await _job_names(client) == {name1}

    # the first Job finishes after the skipped slot's startingDeadlineSeconds: that slot
    # is missed for good (without the deadline upstream would run it late), the next one runs
    await clock.step(40)
    await _complete(client, name1, clock.now())
    cj = await eventually(lambda: active_is(0))
    assert cj["status"]["lastSuccessfulTime"]
    assert await _job_names(client) == {name1}
    await clock.step(20)
    third = first + timedelta(minutes=2)
    await eventually(lambda: _has(client, _slot_name("tick", third)))
    assert await _job_names(client) == {name1, _slot_name("tick", third)}


async def test_replace_deletes_the_running_job_and_history_limits_trim_finished_ones(client, start_manager) -> None:
    created = await client.create(CRONJOBS, _cron_job("rep", concurrencyPolicy="Replace", successfulJobsHistoryLimit=1),
                                  namespace="default")
    clock = _clock_after(created)
    await start_manager("cronjob", clock=clock)
    first = (clock.now() + timedelta(minutes=1)).replace(second=0)
    await clock.step((first - clock.now()).total_seconds() + 1)
    await eventually(lambda: _has(client, _slot_name("rep", first)))
    await clock.step(60)
    second = first + timedelta(minutes=1)
    await eventually(lambda: _has(client, _slot_name("rep", second)))
    await eventually(lambda: _gone_or_deleting(client, _slot_name("rep", first)))
    # two finished Jobs with a limit of one: the older goes
    await _complete(client, _slot_name("rep", second), clock.now())
    await clock.step(60)
    third = second + timedelta(minutes=1)
    await eventually(lambda: _has(client, _slot_name("rep", third)))
    await _complete(client, _slot_name("rep", third), clock.now())
    await eventually(lambda: _gone_or_deleting(client, _slot_name("rep", second)))
    assert _slot_name("rep", third) in await _job_names(client)


async def test_suspended_cron_job_starts_nothing(client, start_manager) -> None:
    await client.create(CRONJOBS, _cron_job("off", suspend=True), namespace="default")
    created = await client.create(CRONJOBS, _cron_job("on"), namespace="default")  # the control
    clock = _clock_after(created)
    await start_manager("cronjob", clock=clock)
    await clock.step(125)
    await eventually(lambda: _cron_has_run(client, "on"))
    cj = await client.get(CRONJOBS, "default", "off")
    assert not (cj.get("status") or {}).get("lastScheduleTime")
    assert all(n.startswith("on-") for n in await _job_names(client))


async def _cron_has_run(client, name: str) -> bool:
    return any(n.startswith(f"{name}-") for n in await _job_names(client))


async def test_ttl_after_finished_deletes_a_job_once_its_time_is_up(client, start_manager) -> None:
    clock = FakeClock(start=datetime.now(timezone.utc).replace(microsecond=0))
    await start_manager("ttl-after-finished", clock=clock)
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "short"},
           "spec": {"ttlSecondsAfterFinished": 100, "template": {"spec": {
               "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}
    await client.create(JOBS, job, namespace="default")
    await _complete(client, "short", clock.now())
    await clock.step(50)
    assert not (await client.get(JOBS, "default", "short"))["metadata"].get("deletionTimestamp")
    await clock.step(51)
    await eventually(lambda: _gone_or_deleting(client, "short"))


async def _has(client, name: str) -> bool:
    return name in await _job_names(client)


async def _reason_seen(client, reason: str) -> bool:
    return reason in await _event_reasons(client)


async def _gone_or_deleting(client, name: str) -> bool:
    for j in (await client.list(JOBS, "default"))["items"]:
        if j["metadata"]["name"] == name:
            return bool(j["metadata"].get("deletionTimestamp"))
    return True
