"""Human-readable durations, as kubectl users read them in AGE and RESTARTS.

Mirrors apimachinery's ``util/duration``: :func:`human_duration` is
``HumanDuration`` (2-3 significant figures: ``45s``, ``3m12s``, ``2d3h``,
``1y30d``) and is what every upstream printer uses for ages;
:func:`short_human_duration` is ``ShortHumanDuration`` (one unit: ``3m``,
``2d``).

Invariants (from upstream, kept because users and scripts see them):

- a duration more than one second in the future prints ``<invalid>``; up to
  one second in the future prints ``0s`` (clock skew between machines);
- every unit is truncated, never rounded (Go's integer division);
- a missing timestamp prints ``<unknown>`` (:func:`since`).

Timestamps are RFC 3339 strings as they appear in objects (``Time`` has second
precision, ``MicroTime`` microseconds); :func:`parse_time` accepts both.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

__all__ = [
    "human_duration",
    "short_human_duration",
    "parse_time",
    "since",
    "rfc3339",
]

_MINUTE = 60
_HOUR = 60 * _MINUTE
_DAY = 24 * _HOUR
_YEAR_DAYS = 365


def _whole_seconds(d: timedelta) -> int:
    """``int(d.Seconds())`` in Go: truncation toward zero."""
    return int(d.total_seconds())


def human_duration(d: timedelta) -> str:
    """``HumanDuration``: a succinct duration with ~2-3 significant figures."""
    seconds = _whole_seconds(d)
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 2 * _MINUTE:
        return f"{seconds}s"
    minutes = seconds // _MINUTE
    if minutes < 10:
        s = seconds % 60
        return f"{minutes}m" if s == 0 else f"{minutes}m{s}s"
    if minutes < 3 * 60:
        return f"{minutes}m"
    hours = seconds // _HOUR
    if hours < 8:
        m = minutes % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d" if h == 0 else f"{hours // 24}d{h}h"
    days = hours // 24
    if hours < 24 * _YEAR_DAYS * 2:
        return f"{days}d"
    if hours < 24 * _YEAR_DAYS * 8:
        dy = days % _YEAR_DAYS
        years = days // _YEAR_DAYS
        return f"{years}y" if dy == 0 else f"{years}y{dy}d"
    return f"{days // _YEAR_DAYS}y"


def short_human_duration(d: timedelta) -> str:
    """``ShortHumanDuration``: one unit, truncated."""
    seconds = _whole_seconds(d)
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < _MINUTE:
        return f"{seconds}s"
    minutes = seconds // _MINUTE
    if minutes < 60:
        return f"{minutes}m"
    hours = seconds // _HOUR
    if hours < 24:
        return f"{hours}h"
    if hours < 24 * _YEAR_DAYS:
        return f"{hours // 24}d"
    return f"{hours // 24 // _YEAR_DAYS}y"


def parse_time(value: object) -> datetime | None:
    """An aware datetime from an RFC 3339 ``Time``/``MicroTime``; None if absent or unparsable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed


def since(timestamp: object, now: datetime) -> str:
    """``translateTimestampSince``: the age of ``timestamp`` at ``now``, or ``<unknown>``."""
    at = parse_time(timestamp)
    if at is None:
        return "<unknown>"
    return human_duration(now - at)


def rfc3339(timestamp: object) -> str:
    """A timestamp re-rendered as Go formats ``time.RFC3339`` in UTC.

    A missing timestamp renders as Go's zero time, as the default table
    convertor does for objects without ``creationTimestamp``.
    """
    at = parse_time(timestamp)
    if at is None:
        return "0001-01-01T00:00:00Z"
    return at.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
