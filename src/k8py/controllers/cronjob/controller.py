"""The CronJob controller: create a Job for each scheduled time.

Upstream: ``pkg/controller/cronjob/cronjob_controllerv2.go``. ``sync(key)``
reads the CronJob and the Jobs it controls from the caches, then:

1. reconciles ``status.active`` with the Jobs (``SawCompletedJob`` when one
   finished, ``MissingJob`` when one is gone, ``UnexpectedJob`` for a running
   Job it does not list) and ``status.lastSuccessfulTime``;
2. unless suspended (or the schedule or ``timeZone`` is invalid, which is an
   event and no retry), finds the most recent slot not yet run
   (:mod:`.scheduling`); a slot later than ``startingDeadlineSeconds`` is
   ``MissSchedule``; ``Forbid`` skips a slot while a Job is active
   (``JobAlreadyActive``), ``Replace`` deletes the active Jobs first, ``Allow``
   just runs;
3. creates the Job ``<cronjob>-<minutes>`` (one name per slot, so a retry after
   a crash finds the Job instead of making another) with the
   ``batch.kubernetes.io/cronjob-scheduled-timestamp`` annotation, adds it to
   ``status.active`` and sets ``lastScheduleTime``;
4. deletes finished Jobs beyond the successful and failed history limits,
   oldest first, and returns the time until the next slot (plus 100 ms, counted
   when the sync ends), so the queue brings the key back exactly then on the
   controller's clock.
"""

from __future__ import annotations

import copy
import logging
from datetime import datetime, timezone
from typing import Any

from k8py.api.errors import AlreadyExists, NotFound
from k8py.client.keys import split_key
from k8py.client.resource import Resource
from k8py.client.resources import JOBS
from k8py.controllers.context import ControllerContext
from k8py.controllers.cronjob.schedule import ScheduleError, load_time_zone, parse
from k8py.controllers.cronjob.scheduling import (
    Missed, format_time, job_name_for, most_recent_schedule_time, next_requeue_delay, parse_time,
)
from k8py.controllers.keyed_controller import KeyedController, unwrap_tombstone
from k8py.controllers.owner_refs import controller_ref, new_controller_ref

__all__ = ["CRONJOBS", "CronJobController", "SCHEDULED_TIMESTAMP"]

logger = logging.getLogger(__name__)

CRONJOBS = Resource("batch", "v1", "cronjobs", True, "CronJob")
SCHEDULED_TIMESTAMP = "batch.kubernetes.io/cronjob-scheduled-timestamp"


def _finished_condition(job: dict[str, Any]) -> str | None:
    for cond in (job.get("status") or {}).get("conditions") or ():
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return str(cond["type"])
    return None


def _rfc1123z(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%a, %d %b %Y %H:%M:%S +0000")


class CronJobController(KeyedController):
    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, name="cronjob", queue_name="cronjob")
        self.cron_jobs = ctx.informers.informer(CRONJOBS)
        self.jobs = ctx.informers.informer(JOBS)
        self.cron_lister = ctx.informers.lister(CRONJOBS)
        self.job_lister = ctx.informers.lister(JOBS)
        self.wait_for(self.cron_jobs, self.jobs)
        self.recorder = ctx.recorder("cronjob-controller")
        self.cron_jobs.add_event_handler(on_add=self.enqueue, on_update=lambda old, new: self.enqueue(new),
                                         on_delete=self.enqueue)
        self.jobs.add_event_handler(on_add=self._job_changed, on_update=lambda old, new: self._job_changed(new),
                                    on_delete=self._job_changed)

    def _job_changed(self, obj: Any) -> None:
        job = unwrap_tombstone(obj)
        if not isinstance(job, dict):
            return
        ref = controller_ref(job)
        if ref is not None and ref.get("kind") == "CronJob":
            self.queue.add(f"{job['metadata'].get('namespace')}/{ref.get('name')}")

    def _event(self, cron_job: dict[str, Any], event_type: str, reason: str, message: str) -> None:
        self.recorder.eventf(cron_job, event_type, reason, message, resource=CRONJOBS)

    async def sync(self, key: str) -> float | None:
        namespace, name = split_key(key)
        cached = self.cron_lister.try_get(namespace, name)
        if cached is None:
            return None
        cron_job = copy.deepcopy(cached)
        uid = cron_job["metadata"]["uid"]
        jobs = [j for j in self.job_lister.list(namespace=namespace) if (controller_ref(j) or {}).get("uid") == uid]
        status = cron_job.setdefault("status", {})
        before = copy.deepcopy(status)
        await self._reconcile_active(cron_job, jobs)
        try:
            due = await self._schedule(cron_job, jobs)
        finally:
            if status != before:
                cron_job = await self.client.update_status(CRONJOBS, cron_job)
        await self._cleanup_history(cron_job, jobs)
        # counted from the clock now, not from the sync's start: the writes above took time (and a
        # test's fake clock may have been stepped meanwhile), the slot did not move
        return None if due is None else max(0.0, (due - self.clock.now()).total_seconds())

    async def _reconcile_active(self, cron_job: dict[str, Any], jobs: list[dict[str, Any]]) -> None:
        status = cron_job["status"]
        active = list(status.get("active") or [])
        active_uids = {ref.get("uid") for ref in active}
        for job in jobs:
            juid = job["metadata"]["uid"]
            finished = _finished_condition(job)
            if juid not in active_uids and not finished:
                self._event(cron_job, "Warning", "UnexpectedJob",
                            f"Saw a job that the controller did not create or forgot: {job['metadata']['name']}")
            elif juid in active_uids and finished:
                active = [ref for ref in active if ref.get("uid") != juid]
                self._event(cron_job, "Normal", "SawCompletedJob",
                            f"Saw completed job: {job['metadata']['name']}, condition: {finished}")
            if finished == "Complete":
                done = parse_time((job.get("status") or {}).get("completionTime"))
                last = parse_time(status.get("lastSuccessfulTime"))
                if done is not None and (last is None or done > last):
                    status["lastSuccessfulTime"] = format_time(done)
        known = {j["metadata"]["uid"] for j in jobs}
        for ref in list(active):
            if ref.get("uid") in known:
                continue
            try:
                found = await self.client.get(JOBS, ref.get("namespace") or cron_job["metadata"]["namespace"], ref["name"])
                if found["metadata"]["uid"] == ref.get("uid"):
                    continue
            except NotFound:
                pass
            self._event(cron_job, "Normal", "MissingJob", f"Active job went missing: {ref.get('name')}")
            active = [r for r in active if r.get("uid") != ref.get("uid")]
        if active:
            status["active"] = active
        else:
            status.pop("active", None)

    async def _schedule(self, cron_job: dict[str, Any], jobs: list[dict[str, Any]]) -> datetime | None:
        """Start what is due; when to look again (the next slot plus 100 ms), or None."""
        meta, spec, status = cron_job["metadata"], cron_job.get("spec") or {}, cron_job["status"]
        if meta.get("deletionTimestamp"):
            return None
        try:
            tz = load_time_zone(spec.get("timeZone"))
        except ScheduleError as err:
            self._event(cron_job, "Warning", "UnknownTimeZone", f"invalid timeZone: {spec.get('timeZone')!r}: {err}")
            return None
        if spec.get("suspend"):
            return None
        try:
            schedule = parse(spec.get("schedule", ""))
        except ScheduleError as err:
            self._event(cron_job, "Warning", "UnparseableSchedule",
                        f"unparseable schedule: {spec.get('schedule')!r} : {err}")
            return None

        def next_fn(t: datetime) -> datetime | None:
            return schedule.next(t, tz)

        now = self.clock.now()

        def requeue() -> datetime | None:
            delay = next_requeue_delay(cron_job, now, next_fn)
            return None if delay is None else now + delay

        decision = most_recent_schedule_time(cron_job, now, next_fn, include_starting_deadline=True)
        if decision.missed is Missed.MANY:
            self._event(cron_job, "Warning", "TooManyMissedTimes",
                        "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew")
        scheduled = decision.most_recent
        if scheduled is None:
            return requeue()
        deadline = spec.get("startingDeadlineSeconds")
        if deadline is not None and (now - scheduled).total_seconds() > int(deadline):
            self._event(cron_job, "Normal", "MissSchedule",
                        f"Missed scheduled time to start a job: {_rfc1123z(scheduled)}")
            return requeue()
        job_name = job_name_for(meta["name"], scheduled)
        active = list(status.get("active") or [])
        if any(ref.get("name") == job_name for ref in active):
            return requeue()
        policy = spec.get("concurrencyPolicy", "Allow")
        if policy == "Forbid" and active:
            self._event(cron_job, "Normal", "JobAlreadyActive",
                        "Not starting job because prior execution is running and concurrency policy is Forbid")
            return requeue()
        if policy == "Replace":
            for ref in active:
                try:
                    await self.client.delete(JOBS, ref.get("namespace") or meta["namespace"], ref["name"],
                                             propagation_policy="Background")
                except NotFound:
                    pass
                self._event(cron_job, "Normal", "SuccessfulDelete", f"Deleted job {ref['name']}")
            active = []
            status.pop("active", None)
        job = self._job_from_template(cron_job, job_name, scheduled, tz)
        try:
            created = await self.client.create(JOBS, job, namespace=meta["namespace"])
        except AlreadyExists:
            existing = await self.client.get(JOBS, meta["namespace"], job_name)
            if (controller_ref(existing) or {}).get("uid") != meta["uid"]:
                return requeue()
            created = existing
        except Exception as err:
            self._event(cron_job, "Warning", "FailedCreate", f"Error creating job: {err}")
            raise
        else:
            self._event(cron_job, "Normal", "SuccessfulCreate", f"Created job {job_name}")
        cmeta = created["metadata"]
        active.append({"apiVersion": "batch/v1", "kind": "Job", "name": cmeta["name"],
                       "namespace": cmeta["namespace"], "uid": cmeta["uid"],
                       "resourceVersion": cmeta.get("resourceVersion")})
        status["active"] = active
        status["lastScheduleTime"] = format_time(scheduled)
        return requeue()

    def _job_from_template(self, cron_job: dict[str, Any], name: str, scheduled: datetime, tz: Any) -> dict[str, Any]:
        template = copy.deepcopy((cron_job.get("spec") or {}).get("jobTemplate") or {})
        tmeta = template.get("metadata") or {}
        annotations = dict(tmeta.get("annotations") or {})
        local = scheduled.astimezone(tz)
        annotations[SCHEDULED_TIMESTAMP] = local.isoformat().replace("+00:00", "Z")
        meta: dict[str, Any] = {"name": name, "namespace": cron_job["metadata"]["namespace"],
                                "annotations": annotations,
                                "ownerReferences": [new_controller_ref(cron_job, CRONJOBS)]}
        if tmeta.get("labels"):
            meta["labels"] = dict(tmeta["labels"])
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": template.get("spec") or {}}

    async def _cleanup_history(self, cron_job: dict[str, Any], jobs: list[dict[str, Any]]) -> None:
        spec = cron_job.get("spec") or {}
        limits = {"Complete": spec.get("successfulJobsHistoryLimit"), "Failed": spec.get("failedJobsHistoryLimit")}
        active_uids = {ref.get("uid") for ref in (cron_job.get("status") or {}).get("active") or ()}
        for condition, limit in limits.items():
            if limit is None:
                continue
            finished = [j for j in jobs if _finished_condition(j) == condition and j["metadata"]["uid"] not in active_uids]
            if len(finished) <= limit:
                continue
            finished.sort(key=lambda j: ((j.get("status") or {}).get("startTime") or j["metadata"].get("creationTimestamp", "")))
            for job in finished[:len(finished) - int(limit)]:
                try:
                    await self.client.delete(JOBS, job["metadata"]["namespace"], job["metadata"]["name"],
                                             propagation_policy="Background")
                except NotFound:
                    continue
                self._event(cron_job, "Normal", "SuccessfulDelete", f"Deleted job {job['metadata']['name']}")
