"""The Job controller: run a Job's pods to completion, count them exactly once.

Upstream: ``pkg/controller/job/job_controller.go``. ``sync(key)`` reads the Job
and its pods (selected by the uid-derived selector and the controller
ownerReference) from the shared caches and then:

1. **Counts finished pods exactly once** (the job-tracking finalizer): every
   pod is created with ``batch.kubernetes.io/job-tracking``; a newly finished
   pod's uid goes into ``status.uncountedTerminatedPods`` (written first), then
   the finalizer is removed from the pod, then the uid moves into
   ``succeeded``/``failed``. A crash between steps repeats the step, never the
   count. Pods matching an ``Ignore`` rule of the pod failure policy lose the
   finalizer without being counted.
2. **Decides whether the Job has finished** (see :mod:`.conditions`): a
   ``FailJob`` rule, failures beyond ``backoffLimit``, failed indexes,
   ``activeDeadlineSeconds``; or enough successes. The interim condition
   (``FailureTarget``/``SuccessCriteriaMet``) is written first and the active
   pods deleted; the terminal condition follows when no pod is left running.
3. **Otherwise manages pods**: deletes all of them while ``suspend`` holds;
   deletes surplus ones; creates missing ones in slow-start batches once the
   backoff after the last failure has passed (the sync returns the remaining
   backoff so the loop looks again then). Indexed Jobs create the lowest
   pending indexes, each pod named ``<job>-<index>-`` with the index in its
   annotation, label, hostname and ``JOB_COMPLETION_INDEX``.

Expectations keep a slow watch from causing a second round of creates.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from k8py.api.errors import Conflict, NotFound
from k8py.api.selectors import label_selector_from_dict
from k8py.client.keys import split_key
from k8py.client.resources import JOBS, PODS
from k8py.client.rest import PatchType
from k8py.controllers.context import ControllerContext
from k8py.controllers.controller_ref_manager import ControllerRefManager, recheck_owner
from k8py.controllers.expectations import ControllerExpectations
from k8py.controllers.job import indexes as ix
from k8py.controllers.job.backoff import BackoffRecord, remaining_backoff
from k8py.controllers.job.conditions import find_condition, is_finished, set_condition
from k8py.controllers.job.verdicts import failure_verdict, pending_verdict, success_verdict
from k8py.controllers.job.tracking import (
    TRACKING_FINALIZER, deleting as _deleting, has_finalizer as _has_finalizer, is_failed as _is_failed,
    set_uncounted, tally_finished_pods, terminal as _terminal,
)
from k8py.controllers.keyed_controller import KeyedController, unwrap_tombstone
from k8py.controllers.owner_refs import controller_ref, new_controller_ref
from k8py.controllers.pod_control import PodControl, slow_start_batch
from k8py.controllers.pod_status import format_time, is_pod_ready, parse_time

__all__ = ["JobController", "TRACKING_FINALIZER"]

logger = logging.getLogger(__name__)

DEFAULT_POD_FAILURE_BACKOFF = 10.0
MAX_POD_FAILURE_BACKOFF = 600.0


class JobController(KeyedController):
    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, name="job", queue_name="job")
        self.jobs = ctx.informers.informer(JOBS)
        self.pods = ctx.informers.informer(PODS)
        self.job_lister = ctx.informers.lister(JOBS)
        self.pod_lister = ctx.informers.lister(PODS)
        self.wait_for(self.jobs, self.pods)
        self.recorder = ctx.recorder("job-controller")
        self.pod_control = PodControl(ctx.client, self.recorder)
        self.expectations = ControllerExpectations(clock=ctx.clock)
        self.backoffs: dict[str, BackoffRecord] = {}
        extra = ctx.options.extra
        self.backoff_base = float(extra.get("job_pod_failure_backoff", DEFAULT_POD_FAILURE_BACKOFF))
        self.backoff_cap = float(extra.get("job_pod_failure_backoff_max", MAX_POD_FAILURE_BACKOFF))
        self.jobs.add_event_handler(on_add=self.enqueue, on_update=lambda old, new: self.enqueue(new),
                                    on_delete=self._job_deleted)
        self.pods.add_event_handler(on_add=self._pod_added, on_update=self._pod_updated,
                                    on_delete=self._pod_deleted)

    # -- event handlers: pods map to their controlling Job ----------------------

    def _job_key(self, pod: dict[str, Any]) -> str | None:
        ref = controller_ref(pod)
        if ref is None or ref.get("kind") != "Job":
            return None
        return f"{pod['metadata'].get('namespace')}/{ref.get('name')}"

    def _pod_added(self, pod: dict[str, Any]) -> None:
        key = self._job_key(pod)
        if key is not None:
            self.expectations.creation_observed(key)
            self.queue.add(key)

    def _pod_updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        key = self._job_key(new)
        if key is not None:
            self.queue.add(key)

    def _pod_deleted(self, obj: Any) -> None:
        pod = unwrap_tombstone(obj)
        key = self._job_key(pod) if isinstance(pod, dict) else None
        if key is not None:
            self.queue.add(key)

    def _job_deleted(self, obj: Any) -> None:
        job = unwrap_tombstone(obj)
        if isinstance(job, dict):
            key = f"{job['metadata'].get('namespace')}/{job['metadata'].get('name')}"
            self.expectations.delete(key)
            self.backoffs.pop(key, None)
            self.enqueue(job)

    # -- sync -----------------------------------------------------------------------

    def _owned_pods(self, job: dict[str, Any]) -> list[dict[str, Any]]:
        uid = job["metadata"]["uid"]
        selector = (job.get("spec") or {}).get("selector")
        if not selector:
            return []
        pods = self.pod_lister.list(label_selector_from_dict(selector), namespace=job["metadata"]["namespace"])
        return [p for p in pods if (controller_ref(p) or {}).get("uid") == uid]

    async def _release_orphans(self, namespace: str, name: str) -> None:
        """A deleted Job's pods must not keep its tracking finalizer (they could never
        go); checked against the API server, as a cache may not have the Job yet."""
        pods = [p for p in self.pod_lister.list(namespace=namespace)
                if _has_finalizer(p) and (controller_ref(p) or {}).get("kind") == "Job"
                and (controller_ref(p) or {}).get("name") == name]
        if not pods:
            return
        try:
            live = await self.client.get(JOBS, namespace, name)
        except NotFound:
            live = None
        live_uid = (live or {}).get("metadata", {}).get("uid")
        await self._remove_finalizers([p for p in pods if (controller_ref(p) or {}).get("uid") != live_uid])

    async def _claim_pods(self, job: dict[str, Any]) -> list[dict[str, Any]]:
        """The Job's pods, adopting orphans its selector matches (upstream ``getPodsForJob``)."""
        selector = (job.get("spec") or {}).get("selector")
        if not selector:
            return []
        manager = ControllerRefManager(self.client, job, JOBS, PODS, label_selector_from_dict(selector),
                                       recheck_owner(self.client, JOBS, job))
        return await manager.claim(self.pod_lister.list(namespace=job["metadata"]["namespace"]))

    async def sync(self, key: str) -> float | None:
        namespace, name = split_key(key)
        job = self.job_lister.try_get(namespace, name)
        if job is None:
            self.expectations.delete(key)
            self.backoffs.pop(key, None)
            await self._release_orphans(namespace, name)
            return None
        job = copy.deepcopy(job)
        pods = await self._claim_pods(job)
        if is_finished(job):
            await self._remove_finalizers([p for p in pods if _has_finalizer(p)])
            return None
        if job["metadata"].get("deletionTimestamp"):
            # being deleted (foreground: the garbage collector waits for these pods)
            await self._remove_finalizers([p for p in pods if _has_finalizer(p) and (_deleting(p) or _terminal(p))])
            return None
        if (job.get("spec") or {}).get("managedBy") not in (None, "kubernetes.io/job-controller"):
            return None
        try:
            return await self._sync_job(key, job, pods)
        except Conflict:
            self.queue.add(key)  # the cache was behind our own write: look again
            return None

    async def _sync_job(self, key: str, job: dict[str, Any], pods: list[dict[str, Any]]) -> float | None:
        spec = job.get("spec") or {}
        status: dict[str, Any] = job.setdefault("status", {})
        before = copy.deepcopy(status)
        now = self.clock.now()
        now_s = format_time(now)
        indexed = spec.get("completionMode") == "Indexed"
        record = self.backoffs.setdefault(key, BackoffRecord())

        # 1. count finished pods exactly once
        tally = tally_finished_pods(spec, status, pods)
        unc_succeeded, unc_failed = tally.uncounted_succeeded, tally.uncounted_failed
        completed, failed_indexes, to_release = tally.completed, tally.failed_indexes, tally.to_release
        fail_job, new_failures, new_successes = tally.fail_job, tally.new_failures, tally.new_successes
        uncounted = status.setdefault("uncountedTerminatedPods", {})
        record.record(new_failures=new_failures, new_successes=new_successes, now=self.clock.monotonic())
        set_uncounted(uncounted, unc_succeeded, unc_failed)
        if indexed:
            status["completedIndexes"] = ix.format_intervals(completed)
            if spec.get("backoffLimitPerIndex") is not None:
                status["failedIndexes"] = ix.format_intervals(failed_indexes)
        if new_failures or new_successes:
            job = await self._write_status(job)
            status = job["status"]
        await self._remove_finalizers(to_release)
        released = {p["metadata"]["uid"] for p in to_release}
        live = {p["metadata"]["uid"] for p in pods if _has_finalizer(p)} - released
        moved_s = [u for u in unc_succeeded if u not in live]
        moved_f = [u for u in unc_failed if u not in live]
        uncounted = status.setdefault("uncountedTerminatedPods", {})
        set_uncounted(uncounted, [u for u in unc_succeeded if u in live], [u for u in unc_failed if u in live])
        status["succeeded"] = int(status.get("succeeded") or 0) + len(moved_s)
        if indexed:
            status["succeeded"] = len(completed)
        status["failed"] = int(status.get("failed") or 0) + len(moved_f)
        failed_total = status["failed"] + len(uncounted.get("failed", ()))
        succeeded_total = (len(completed) if indexed else
                           status["succeeded"] + len(uncounted.get("succeeded", ())))

        remaining_pods = [p for p in pods if not _terminal(p)]
        active = [p for p in remaining_pods if not _deleting(p)]
        terminating = [p for p in remaining_pods if _deleting(p)]

        # 2. has the Job finished?
        verdict = pending_verdict(status) or fail_job or failure_verdict(
            job, failed_total, failed_indexes, completed, active, now)
        if verdict is None:
            verdict = success_verdict(spec, succeeded_total, completed, active)
        requeue: float | None = None
        if verdict is not None:
            interim = "FailureTarget" if verdict.kind == "failure" else "SuccessCriteriaMet"
            if set_condition(status, interim, "True", verdict.reason, verdict.message, now_s) \
                    and verdict.kind == "failure":
                self.recorder.eventf(job, "Warning", verdict.reason, verdict.message, resource=JOBS)
            if active:
                await self._delete_pods(job, active)
            elif all(p["metadata"]["uid"] in released or not _has_finalizer(p) for p in terminating):
                terminal = "Failed" if verdict.kind == "failure" else "Complete"
                set_condition(status, terminal, "True", verdict.reason, verdict.message, now_s)
                if verdict.kind == "success":
                    status["completionTime"] = now_s
                    self.recorder.eventf(job, "Normal", "Completed", "Job completed", resource=JOBS)
            active = []
        else:
            requeue = await self._manage_pods(key, job, status, active, terminating, completed,
                                              failed_indexes, succeeded_total, record, now_s)
            deadline = spec.get("activeDeadlineSeconds")
            start = parse_time(status.get("startTime"))
            if deadline is not None and start is not None and not spec.get("suspend"):
                left = start.timestamp() + deadline - now.timestamp()
                requeue = left if requeue is None else min(requeue, left)

        status["active"] = len(active)
        status["ready"] = sum(1 for p in active if is_pod_ready(p))
        status["terminating"] = len(terminating)
        for omitempty in ("active", "succeeded", "failed"):  # Go's omitempty; ready/terminating are pointers
            if not status.get(omitempty):
                status.pop(omitempty, None)
        if status != before:
            await self._write_status(job)
        return requeue

    # -- pods ---------------------------------------------------------------------

    async def _manage_pods(self, key: str, job: dict[str, Any], status: dict[str, Any],
                           active: list[dict[str, Any]], terminating: list[dict[str, Any]],
                           completed: set[int], failed_indexes: set[int], succeeded: int,
                           record: BackoffRecord, now_s: str) -> float | None:
        spec = job.get("spec") or {}
        if spec.get("suspend"):
            if set_condition(status, "Suspended", "True", "JobSuspended", "Job suspended", now_s):
                self.recorder.eventf(job, "Normal", "Suspended", "Job suspended", resource=JOBS)
            await self._delete_pods(job, active)
            active.clear()
            return None
        if find_condition(status, "Suspended") is not None:
            set_condition(status, "Suspended", "False", "JobResumed", "Job resumed", now_s)
            self.recorder.eventf(job, "Normal", "Resumed", "Job resumed", resource=JOBS)
            status["startTime"] = now_s
        status.setdefault("startTime", now_s)
        if not self.expectations.satisfied(key):
            return None
        parallelism = int(spec.get("parallelism", 1))
        completions = spec.get("completions")
        indexed = spec.get("completionMode") == "Indexed"
        busy = len(active) + (len(terminating) if spec.get("podReplacementPolicy") == "Failed" else 0)
        surplus: list[dict[str, Any]] = []
        wanted_indexes: list[int] = []
        if indexed:
            seen: set[int] = set()
            for pod in sorted(active, key=lambda p: p["metadata"].get("creationTimestamp", "")):
                index = ix.pod_index(pod, completions or 0)
                if index is None or index in seen or index in completed or index in failed_indexes:
                    surplus.append(pod)
                else:
                    seen.add(index)
            wait_for_terminating = spec.get("podReplacementPolicy") == "Failed"
            occupied = set(seen)
            if wait_for_terminating:
                occupied |= {i for p in terminating if (i := ix.pod_index(p, completions or 0)) is not None}
            room = max(0, parallelism - len(seen) - (len(terminating) if wait_for_terminating else 0))
            wanted_indexes = ix.first_pending_indexes(completions or 0, completed | failed_indexes, occupied, room)
            want = 0
        else:
            target = parallelism if completions is None else min(parallelism, completions - succeeded)
            if completions is None and succeeded > 0:
                target = 0
            want = max(0, target) - busy
            if want < 0:
                surplus = _least_valuable_first(active)[:min(-want, len(active))]
                want = 0
        if surplus:
            await self._delete_pods(job, surplus)
            for pod in surplus:
                active.remove(pod)
        count = len(wanted_indexes) if indexed else want
        if count <= 0:
            return None
        wait = remaining_backoff(record, self.clock.monotonic(), base=self.backoff_base, cap=self.backoff_cap)
        if wait > 0:
            return wait
        index_failures = self._index_failures(job) if indexed else {}
        pending = list(wanted_indexes)
        self.expectations.expect_creations(key, count)

        async def create_one() -> None:
            index = pending.pop(0) if indexed else None
            try:
                await self._create_pod(job, index, index_failures.get(index or 0, 0))
            except Exception:
                self.expectations.creation_observed(key)
                raise

        created, error = await slow_start_batch(count, 1, create_one)
        for _ in range(count - created - (1 if error else 0)):
            self.expectations.creation_observed(key)
        if error is not None:
            raise error
        return None

    def _index_failures(self, job: dict[str, Any]) -> dict[int, int]:
        completions = (job.get("spec") or {}).get("completions") or 0
        out: dict[int, int] = {}
        for pod in self._owned_pods(job):
            index = ix.pod_index(pod, completions)
            if index is None:
                continue
            count = ix.annotation_int(pod, ix.INDEX_FAILURE_COUNT) + (1 if _is_failed(pod, job["spec"]) else 0)
            out[index] = max(out.get(index, 0), count)
        return out

    async def _create_pod(self, job: dict[str, Any], index: int | None, index_failures: int) -> None:
        meta = job["metadata"]
        template = (job.get("spec") or {}).get("template") or {}

        def mutate(pod: dict[str, Any]) -> None:
            pmeta = pod["metadata"]
            pmeta["finalizers"] = [*(pmeta.get("finalizers") or []), TRACKING_FINALIZER]
            if index is not None:
                ix.decorate_pod(pod, meta["name"], index,
                                index_failures if (job.get("spec") or {}).get("backoffLimitPerIndex") is not None else None)

        await self.pod_control.create_pod(meta["namespace"], template, job, JOBS,
                                          new_controller_ref(job, JOBS), mutate=mutate)

    async def _delete_pods(self, job: dict[str, Any], pods: list[dict[str, Any]]) -> None:
        for pod in pods:
            if _deleting(pod):
                continue
            try:
                await self.pod_control.delete_pod(pod["metadata"]["namespace"], pod["metadata"]["name"], job, JOBS)
            except NotFound:
                pass

    async def _remove_finalizers(self, pods: list[dict[str, Any]]) -> None:
        for pod in pods:
            finalizers = list(pod["metadata"].get("finalizers") or [])
            if TRACKING_FINALIZER not in finalizers:
                continue
            i = finalizers.index(TRACKING_FINALIZER)
            patch = [{"op": "test", "path": f"/metadata/finalizers/{i}", "value": TRACKING_FINALIZER},
                     {"op": "remove", "path": f"/metadata/finalizers/{i}"}]
            try:
                await self.client.patch(PODS, pod["metadata"]["namespace"], pod["metadata"]["name"], patch,
                                        patch_type=PatchType.JSON)
            except NotFound:
                pass

    async def _write_status(self, job: dict[str, Any]) -> dict[str, Any]:
        updated = await self.client.update_status(JOBS, job)
        return copy.deepcopy(updated)


def _least_valuable_first(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Unscheduled, then not-ready pods go first; among equals the newest."""
    newest_first = sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp", ""), reverse=True)
    return sorted(newest_first, key=lambda p: (bool((p.get("spec") or {}).get("nodeName")), is_pod_ready(p)))
