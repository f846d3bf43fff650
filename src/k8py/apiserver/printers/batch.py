"""Printers for the ``batch`` group: Jobs and CronJobs (1.32 columns).

Job STATUS is derived from conditions in upstream's order of precedence:
``Complete``, ``Failed``, ``Terminating`` (deletion timestamp),
``Suspended``, ``FailureTarget``, else ``Running``. COMPLETIONS is
``succeeded/completions``, or ``succeeded/1`` (``... of <parallelism>`` when
parallel) for jobs without a completion count. DURATION is empty until the
job starts, then runs until ``completionTime``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .cells import object_age, bool_ptr, container_cells, dig, format_label_selector
from .columns import (
    Column,
    Object,
    Printer,
    age_column,
    containers_column,
    images_column,
    name_column,
)
from .durations import human_duration, parse_time, since

__all__ = ["PRINTERS", "job_status", "job_completions", "job_duration"]

_BATCH = "io.k8s.api.batch.v1."


def _has_condition(obj: Object, kind: str) -> bool:
    for cond in dig(obj, "status", "conditions", default=[]):
        if cond.get("type") == kind:
            return cond.get("status") == "True"
    return False


def job_status(job: Object) -> str:
    if _has_condition(job, "Complete"):
        return "Complete"
    if _has_condition(job, "Failed"):
        return "Failed"
    if dig(job, "metadata", "deletionTimestamp"):
        return "Terminating"
    if _has_condition(job, "Suspended"):
        return "Suspended"
    if _has_condition(job, "FailureTarget"):
        return "FailureTarget"
    return "Running"


def job_completions(job: Object) -> str:
    spec = job.get("spec") or {}
    succeeded = int(dig(job, "status", "succeeded", default=0))
    if spec.get("completions") is not None:
        return f"{succeeded}/{spec['completions']}"
    parallelism = int(spec.get("parallelism") or 0)
    if parallelism > 1:
        return f"{succeeded}/1 of {parallelism}"
    return f"{succeeded}/1"


def job_duration(job: Object, now: datetime) -> str:
    start = parse_time(dig(job, "status", "startTime"))
    if start is None:
        return ""
    end = parse_time(dig(job, "status", "completionTime"))
    return human_duration((end or now) - start)


def _job(job: Object, now: datetime) -> list[Any]:
    spec = job.get("spec") or {}
    names, images = container_cells(dig(spec, "template", "spec", "containers", default=[]))
    return [
        dig(job, "metadata", "name", default=""),
        job_status(job),
        job_completions(job),
        job_duration(job, now),
        object_age(job, now),
        names,
        images,
        format_label_selector(spec.get("selector")),
    ]


JOB = Printer(
    (
        name_column(),
        Column("Status", doc="Status of the job."),
        Column("Completions", doc=(_BATCH + "JobStatus", "succeeded")),
        Column("Duration", doc="Time required to complete the job."),
        age_column(),
        containers_column(),
        images_column(),
        Column("Selector", priority=1, doc=(_BATCH + "JobSpec", "selector")),
    ),
    _job,
)


def _cron_job(cron: Object, now: datetime) -> list[Any]:
    spec = cron.get("spec") or {}
    last = dig(cron, "status", "lastScheduleTime")
    job_spec = dig(spec, "jobTemplate", "spec", default={})
    names, images = container_cells(dig(job_spec, "template", "spec", "containers", default=[]))
    return [
        dig(cron, "metadata", "name", default=""),
        spec.get("schedule", ""),
        spec.get("timeZone") if spec.get("timeZone") is not None else "<none>",
        bool_ptr(spec.get("suspend")),
        len(dig(cron, "status", "active", default=[])),
        since(last, now) if last else "<none>",
        object_age(cron, now),
        names,
        images,
        format_label_selector(job_spec.get("selector")),
    ]


_CRON = _BATCH + "CronJob"
CRON_JOB = Printer(
    (
        name_column(),
        Column("Schedule", doc=(_CRON + "Spec", "schedule")),
        Column("Timezone", doc=(_CRON + "Spec", "timeZone")),
        Column("Suspend", type="boolean", doc=(_CRON + "Spec", "suspend")),
        Column("Active", type="integer", doc=(_CRON + "Status", "active")),
        Column("Last Schedule", doc=(_CRON + "Status", "lastScheduleTime")),
        age_column(),
        containers_column(),
        images_column(),
        Column("Selector", priority=1, doc=(_BATCH + "JobSpec", "selector")),
    ),
    _cron_job,
)

PRINTERS: dict[str, Printer] = {"Job": JOB, "CronJob": CRON_JOB}
