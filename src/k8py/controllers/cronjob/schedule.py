"""Cron schedules as the CronJob controller reads them (robfig/cron's standard parser).

Upstream parses ``spec.schedule`` with ``cron.ParseStandard``: five fields
(minute, hour, day of month, month, day of week) or a descriptor (``@yearly``,
``@annually``, ``@monthly``, ``@weekly``, ``@daily``, ``@midnight``,
``@hourly``, ``@every <duration>``). Each field is a comma list of ``*``/``?``,
``a``, ``a-b``, optionally with ``/step``; months and weekdays also take
three-letter names. The API server's validation rejects what does not parse,
so the controller only ever sees valid schedules, but :func:`parse` still
raises :class:`ScheduleError` with robfig's message for one that slipped by.

Day matching follows robfig exactly: when either day field was written as a
bare ``*`` (or ``?``, or ``*/1``) a day must match both fields; otherwise a day
matching either one fires ("1 * 15 * mon" is the 15th *or* Mondays).

Time zones: a schedule is evaluated in wall time of a :class:`zoneinfo.ZoneInfo`
(``spec.timeZone``, UTC when unset). :meth:`CronSchedule.next` walks absolute
time but tests fields in wall time, so a wall time skipped by a DST jump never
fires (robfig does the same) and a repeated hour fires in both of its passes.

Invariants: :meth:`CronSchedule.next` returns an aware UTC datetime strictly
after its argument, with zero seconds (or ``None`` when nothing matches within
five years, robfig's bound); it never consults the real clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = ["CronSchedule", "ScheduleError", "parse", "load_time_zone"]

_MONTHS = {m: i + 1 for i, m in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"))}
_DAYS = {d: i for i, d in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
# (low, high, names) for minute, hour, day of month, month, day of week
_FIELDS: tuple[tuple[int, int, dict[str, int]], ...] = (
    (0, 59, {}), (0, 23, {}), (1, 31, {}), (1, 12, _MONTHS), (0, 6, _DAYS))
_DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_SEARCH_YEARS = 5


class ScheduleError(ValueError):
    """A schedule robfig/cron would not parse; the message is robfig's."""


def load_time_zone(name: str | None) -> ZoneInfo | timezone:
    """``spec.timeZone`` as a tzinfo (UTC when unset); :class:`ScheduleError` if unknown."""
    if name is None or name == "" or name == "UTC":
        return timezone.utc
    if name.startswith("/") or ".." in name:
        raise ScheduleError(f"unknown time zone {name}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as e:
        raise ScheduleError(f"unknown time zone {name}") from e


def _number(text: str, names: dict[str, int]) -> int:
    if text.lower() in names:
        return names[text.lower()]
    if not text.isdigit():
        raise ScheduleError(f'failed to parse int from {text}: strconv.Atoi: parsing "{text}": invalid syntax')
    return int(text)


def _parse_range(expr: str, low: int, high: int, names: dict[str, int]) -> tuple[set[int], bool]:
    """One comma item: the values it selects and whether it counts as a bare star."""
    range_and_step = expr.split("/")
    if len(range_and_step) > 2:
        raise ScheduleError(f"too many slashes: {expr}")
    bounds = range_and_step[0].split("-")
    star = bounds[0] in ("*", "?")
    if star:
        start, end = low, high
    else:
        if len(bounds) > 2:
            raise ScheduleError(f"too many hyphens: {expr}")
        start = _number(bounds[0], names)
        end = _number(bounds[1], names) if len(bounds) == 2 else start
    step = 1
    if len(range_and_step) == 2:
        step = _number(range_and_step[1], {})
        if step <= 0:
            raise ScheduleError(f"step of range should be a positive number: {expr}")
        if len(bounds) == 1 and not star:
            end = high  # "a/n" means a through the maximum, every n
        if step > 1:
            star = False
    if start < low:
        raise ScheduleError(f"beginning of range ({start}) below minimum ({low}): {expr}")
    if end > high:
        raise ScheduleError(f"end of range ({end}) above maximum ({high}): {expr}")
    if start > end:
        raise ScheduleError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
    return set(range(start, end + 1, step)), star


def _parse_field(text: str, low: int, high: int, names: dict[str, int]) -> tuple[frozenset[int], bool]:
    values: set[int] = set()
    star = False
    for expr in text.split(","):
        selected, item_star = _parse_range(expr, low, high, names)
        values |= selected
        star = star or item_star
    return frozenset(values), star


def _parse_duration(text: str) -> float:
    pos, total = 0, 0.0
    for m in _DURATION_PART.finditer(text):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
        pos = m.end()
    if pos != len(text) or not text:
        raise ScheduleError(f"failed to parse duration @every {text}: time: invalid duration \"{text}\"")
    return total


@dataclass(frozen=True)
class CronSchedule:
    """A parsed schedule; either five field sets or a constant ``every`` delay (seconds)."""

    minutes: frozenset[int] = frozenset()
    hours: frozenset[int] = frozenset()
    days_of_month: frozenset[int] = frozenset()
    months: frozenset[int] = frozenset()
    days_of_week: frozenset[int] = frozenset()
    dom_star: bool = False
    dow_star: bool = False
    every: float | None = None

    def _day_matches(self, wall: datetime) -> bool:
        dom = wall.day in self.days_of_month
        dow = (wall.isoweekday() % 7) in self.days_of_week
        if self.dom_star or self.dow_star:
            return dom and dow
        return dom or dow

    def next(self, after: datetime, tz: ZoneInfo | timezone = timezone.utc) -> datetime | None:
        """The first activation strictly after ``after`` (aware), in UTC."""
        if self.every is not None:
            # robfig's ConstantDelaySchedule: whole seconds, at least one
            delay = max(1, int(self.every))
            base = after.astimezone(timezone.utc).replace(microsecond=0)
            return base + timedelta(seconds=delay)
        t = after.astimezone(timezone.utc).replace(second=0, microsecond=0) + timedelta(minutes=1)
        limit = t + timedelta(days=366 * _SEARCH_YEARS)
        while t <= limit:
            wall = t.astimezone(tz)
            if wall.month not in self.months:
                year, month = (wall.year + 1, 1) if wall.month == 12 else (wall.year, wall.month + 1)
                t = _wall_start(datetime(year, month, 1), tz)
                continue
            if not self._day_matches(wall):
                t = _wall_start(datetime(wall.year, wall.month, wall.day) + timedelta(days=1), tz)
                continue
            if wall.hour not in self.hours:
                t = t + timedelta(minutes=60 - wall.minute)
                continue
            if wall.minute not in self.minutes:
                t = t + timedelta(minutes=1)
                continue
            return t
        return None


def _wall_start(naive: datetime, tz: ZoneInfo | timezone) -> datetime:
    """The absolute time of a wall-clock instant (the earlier one if repeated;
    a wall time inside a DST gap maps past the gap)."""
    return naive.replace(tzinfo=tz).astimezone(timezone.utc)


def parse(schedule: str) -> CronSchedule:
    """Parse ``spec.schedule`` as ``cron.ParseStandard`` does."""
    text = schedule.strip()
    if text.startswith("@every "):
        return CronSchedule(every=_parse_duration(text[len("@every "):].strip()))
    if text.startswith("@"):
        if text not in _DESCRIPTORS:
            raise ScheduleError(f"unrecognized descriptor: {text}")
        text = _DESCRIPTORS[text]
    if text.startswith("TZ=") or text.startswith("CRON_TZ="):
        raise ScheduleError("cannot use TZ or CRON_TZ in schedule, use timeZone field instead")
    fields = text.split()
    if len(fields) != 5:
        raise ScheduleError(f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]")
    parsed = [_parse_field(f, low, high, names) for f, (low, high, names) in zip(fields, _FIELDS)]
    return CronSchedule(
        minutes=parsed[0][0], hours=parsed[1][0], days_of_month=parsed[2][0],
        months=parsed[3][0], days_of_week=parsed[4][0],
        dom_star=parsed[2][1], dow_star=parsed[4][1],
    )
