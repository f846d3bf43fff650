"""The cron parser and next-activation search, against robfig/cron's semantics."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from k8py.controllers.cronjob.schedule import ScheduleError, load_time_zone, parse
from k8py.controllers.cronjob.scheduling import (
    Missed, job_name_for, most_recent_schedule_time, next_requeue_delay,
)


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=timezone.utc)


@pytest.mark.parametrize(("schedule", "after", "expected"), [
    ("*/15 * * * *", utc(2026, 1, 1, 10, 7), utc(2026, 1, 1, 10, 15)),
    ("0 * * * *", utc(2026, 1, 1, 10, 0), utc(2026, 1, 1, 11, 0)),
    ("@hourly", utc(2026, 1, 1, 10, 59, 59), utc(2026, 1, 1, 11, 0)),
    ("@daily", utc(2026, 1, 1, 10, 0), utc(2026, 1, 2, 0, 0)),
    ("@weekly", utc(2026, 1, 1, 0, 0), utc(2026, 1, 4, 0, 0)),  # 2026-01-04 is a Sunday
    ("@monthly", utc(2026, 1, 31, 0, 0), utc(2026, 2, 1, 0, 0)),
    ("@yearly", utc(2026, 3, 1), utc(2027, 1, 1)),
    ("30 9 * jan-mar mon-fri", utc(2026, 3, 31, 9, 30), utc(2027, 1, 1, 9, 30)),
    ("0 0 29 2 *", utc(2026, 1, 1), utc(2028, 2, 29)),
    ("5/20 * * * *", utc(2026, 1, 1, 0, 46), utc(2026, 1, 1, 1, 5)),
    ("1-10/3 4 * * *", utc(2026, 1, 1, 4, 4), utc(2026, 1, 1, 4, 7)),
])
def test_next_activation(schedule: str, after: datetime, expected: datetime) -> None:
    assert parse(schedule).next(after) == expected


def test_day_fields_are_or_when_both_restricted_and_and_when_one_is_a_star() -> None:
    either = parse("0 0 15 * mon")  # the 15th or any Monday
    assert either.next(utc(2026, 1, 1)) == utc(2026, 1, 5)  # Monday the 5th
    assert either.next(utc(2026, 1, 13)) == utc(2026, 1, 15)  # Thursday the 15th
    both = parse("0 0 * * mon")  # day of month is a star: Mondays only
    assert both.next(utc(2026, 1, 13)) == utc(2026, 1, 19)
    stepped = parse("0 0 */2 * mon")  # */2 is not a star: odd days or Mondays
    assert stepped.next(utc(2026, 1, 1)) == utc(2026, 1, 3)


def test_time_zone_is_wall_time_and_a_skipped_dst_slot_never_fires() -> None:
    ny = load_time_zone("America/New_York")
    daily = parse("0 9 * * *")
    assert daily.next(utc(2026, 1, 1, 0, 0), ny) == utc(2026, 1, 1, 14, 0)  # 09:00 EST
    assert daily.next(utc(2026, 7, 1, 0, 0), ny) == utc(2026, 7, 1, 13, 0)  # 09:00 EDT
    # 2026-03-08: clocks jump from 02:00 to 03:00 in New York; 02:30 never exists that day
    gap = parse("30 2 8 3 *")
    assert gap.next(utc(2026, 3, 1), ny) == utc(2027, 3, 8, 7, 30)


@pytest.mark.parametrize(("schedule", "message"), [
    ("* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
    ("61 * * * *", "end of range (61) above maximum (59): 61"),
    ("@fortnightly", "unrecognized descriptor: @fortnightly"),
    ("*/0 * * * *", "step of range should be a positive number: */0"),
    ("5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1"),
    ("x * * * *", 'failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax'),
])
def test_unparseable_schedules_raise_robfigs_message(schedule: str, message: str) -> None:
    with pytest.raises(ScheduleError) as e:
        parse(schedule)
    assert str(e.value) == message


def test_unknown_time_zone_is_an_error() -> None:
    with pytest.raises(ScheduleError, match="unknown time zone Mars/Olympus"):
        load_time_zone("Mars/Olympus")


def test_every_is_a_constant_delay_in_whole_seconds() -> None:
    every = parse("@every 1h30m")
    assert every.next(utc(2026, 1, 1, 0, 0, 10)) == utc(2026, 1, 1, 1, 30, 10)


def _cron_job(created: datetime, last: datetime | None = None, deadline: int | None = None) -> dict:
    spec: dict = {"schedule": "* * * * *"}
    if deadline is not None:
        spec["startingDeadlineSeconds"] = deadline
    status = {"lastScheduleTime": last.strftime("%Y-%m-%dT%H:%M:%SZ")} if last else {}
    return {"metadata": {"name": "c", "creationTimestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ")},
            "spec": spec, "status": status}


def test_most_recent_time_is_none_before_the_first_slot_and_the_slot_once_due() -> None:
    hourly = parse("0 * * * *").next
    cj = _cron_job(utc(2026, 1, 1, 10, 5))
    assert most_recent_schedule_time(cj, utc(2026, 1, 1, 10, 59), hourly,
                                     include_starting_deadline=True).most_recent is None
    d = most_recent_schedule_time(cj, utc(2026, 1, 1, 11, 0, 30), hourly, include_starting_deadline=True)
    assert (d.most_recent, d.missed) == (utc(2026, 1, 1, 11, 0), Missed.NONE)


def test_many_missed_schedules_still_yield_only_the_latest_slot() -> None:
    minutely = parse("* * * * *").next
    cj = _cron_job(utc(2026, 1, 1, 0, 0))
    d = most_recent_schedule_time(cj, utc(2026, 1, 2, 0, 0, 30), minutely, include_starting_deadline=True)
    assert d.missed is Missed.MANY
    assert d.most_recent == utc(2026, 1, 2, 0, 0)


def test_starting_deadline_moves_the_earliest_time_up() -> None:
    minutely = parse("* * * * *").next
    cj = _cron_job(utc(2026, 1, 1, 0, 0), deadline=200)
    d = most_recent_schedule_time(cj, utc(2026, 1, 2, 0, 0, 30), minutely, include_starting_deadline=True)
    assert d.missed is Missed.FEW
    assert d.most_recent == utc(2026, 1, 2, 0, 0)


def test_requeue_delay_aims_just_past_the_next_slot() -> None:
    hourly = parse("0 * * * *").next
    cj = _cron_job(utc(2026, 1, 1, 10, 5), last=utc(2026, 1, 1, 11, 0))
    assert next_requeue_delay(cj, utc(2026, 1, 1, 11, 20), hourly) == timedelta(minutes=40, milliseconds=100)


def test_job_names_are_minutes_since_the_epoch() -> None:
    assert job_name_for("nightly", utc(2026, 1, 1, 0, 1)) == f"nightly-{int(utc(2026, 1, 1, 0, 1).timestamp()) // 60}"
