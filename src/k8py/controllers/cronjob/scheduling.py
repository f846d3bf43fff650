"""Which scheduled time a CronJob owes now, and when to look again.

Upstream: ``pkg/controller/cronjob/utils.go`` (``mostRecentScheduleTime``,
``nextScheduleTimeDuration``, ``getJobName``). Pure functions of the CronJob,
``now`` and a ``next`` function (the parsed schedule bound to its time zone),
so the controller's clock is the only source of time.

The count of missed schedules is upstream's rough approximation: the interval
between the first two activations after the earliest time, divided into the
time elapsed. More than 100 missed is ``MANY`` (the controller warns
``TooManyMissedTimes``) but the most recent time is still found, by walking
forward from an estimate, so a controller that was down for days starts
exactly one Job, for the latest slot.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Mapping

from k8py.controllers.cronjob.schedule import ScheduleError

__all__ = ["Missed", "ScheduleDecision", "most_recent_schedule_time", "next_requeue_delay",
           "job_name_for", "parse_time", "format_time"]

NextFn = Callable[[datetime], "datetime | None"]
NEXT_SCHEDULE_DELTA = timedelta(milliseconds=100)


class Missed(enum.Enum):
    NONE = "none"
    FEW = "few"
    MANY = "many"


@dataclass(frozen=True)
class ScheduleDecision:
    earliest: datetime
    most_recent: datetime | None
    missed: Missed


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)


def format_time(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def most_recent_schedule_time(cron_job: Mapping[str, Any], now: datetime, next_fn: NextFn, *,
                              include_starting_deadline: bool) -> ScheduleDecision:
    """The latest activation in (earliest, now], where earliest is lastScheduleTime
    (or creation), moved up to ``now - startingDeadlineSeconds`` when asked."""
    meta = cron_job.get("metadata") or {}
    spec = cron_job.get("spec") or {}
    status = cron_job.get("status") or {}
    earliest = parse_time(status.get("lastScheduleTime")) or parse_time(meta.get("creationTimestamp")) or now
    deadline_seconds = spec.get("startingDeadlineSeconds")
    if include_starting_deadline and deadline_seconds is not None:
        scheduling_deadline = now - timedelta(seconds=int(deadline_seconds))
        if scheduling_deadline > earliest:
            earliest = scheduling_deadline
    t1 = next_fn(earliest)
    if t1 is None or now < t1:
        return ScheduleDecision(earliest, None, Missed.NONE)
    t2 = next_fn(t1)
    if t2 is None or now < t2:
        return ScheduleDecision(earliest, t1, Missed.NONE)
    between = round((t2 - t1).total_seconds())
    if between < 1:
        raise ScheduleError("time difference between two schedules is less than 1 second")
    elapsed = int((now - t1).total_seconds())
    missed_count = elapsed // between + 1
    # step back one interval more than the estimate and let the schedule walk
    # forward: exact for irregular schedules such as "30 6-16/4 * * 1-5"
    t: datetime | None = next_fn(t1 + timedelta(seconds=(missed_count - 2) * between))
    most_recent: datetime | None = None
    while t is not None and t <= now:
        most_recent = t
        t = next_fn(t)
    missed = Missed.MANY if missed_count > 100 else Missed.FEW
    return ScheduleDecision(earliest, most_recent, missed)


def next_requeue_delay(cron_job: Mapping[str, Any], now: datetime, next_fn: NextFn) -> timedelta | None:
    """How long until the next activation (plus upstream's 100 ms), for requeueing."""
    try:
        decision = most_recent_schedule_time(cron_job, now, next_fn, include_starting_deadline=False)
        base = decision.most_recent
        if base is None:
            base = decision.earliest if decision.missed is Missed.NONE else now
    except ScheduleError:
        base = now
    nxt = next_fn(base)
    if nxt is None:
        return None
    return nxt + NEXT_SCHEDULE_DELTA - now


def job_name_for(cron_job_name: str, scheduled: datetime) -> str:
    """``<cronjob>-<minutes since the epoch>``: one name per slot, so a retried
    create of the same slot is an AlreadyExists, never a second Job."""
    return f"{cron_job_name}-{int(scheduled.timestamp()) // 60}"
