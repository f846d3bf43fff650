"""Printers for ResourceQuotas (``NAME  AGE  REQUEST  LIMIT``, upstream's
printResourceQuota: ``pods: 1/2, requests.cpu: 300m/1``, limits apart) and
LimitRanges (``NAME  CREATED AT``)."""

from __future__ import annotations

from typing import Any

from .cells import dig, object_age
from .columns import META, Column, Printer, age_column, name_column
from .durations import rfc3339

__all__ = ["PRINTERS"]


def _usage(obj: dict[str, Any], limits: bool) -> str:
    hard = dig(obj, "status", "hard", default=None) or dig(obj, "spec", "hard", default=None) or {}
    used = dig(obj, "status", "used", default=None) or {}
    names = sorted(n for n in hard if n.startswith("limits.") == limits)
    return ", ".join(f"{n}: {used.get(n, '0')}/{hard[n]}" for n in names)


RESOURCE_QUOTA = Printer(
    (
        name_column(),
        age_column(),
        Column("Request", doc="Request represents a minimum amount of cpu/memory that a container may consume."),
        Column("Limit", doc="Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node."),
    ),
    lambda obj, now: [dig(obj, "metadata", "name", default=""), object_age(obj, now), _usage(obj, False), _usage(obj, True)],
)

LIMIT_RANGE = Printer(
    (name_column(), Column("Created At", type="date", doc=(META, "creationTimestamp"))),
    lambda obj, now: [dig(obj, "metadata", "name", default=""), rfc3339(dig(obj, "metadata", "creationTimestamp"))],
)

PRINTERS = {"ResourceQuota": RESOURCE_QUOTA, "LimitRange": LIMIT_RANGE}
