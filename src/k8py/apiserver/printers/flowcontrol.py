"""Printers for ``flowcontrol.apiserver.k8s.io``, as upstream's:
FlowSchema ``NAME  PRIORITYLEVEL  MATCHINGPRECEDENCE  DISTINGUISHERMETHOD  AGE  MISSINGPL`` and
PriorityLevelConfiguration ``NAME  TYPE  NOMINALCONCURRENCYSHARES  QUEUES  HANDSIZE  QUEUELENGTHLIMIT  AGE``
(``<none>`` where a level has no such setting; MISSINGPL from the ``Dangling`` condition, ``?`` without one)."""

from __future__ import annotations

from typing import Any

from .cells import dig, object_age
from .columns import Column, Printer, age_column, name_column

__all__ = ["PRINTERS"]

_FS = "io.k8s.api.flowcontrol.v1.FlowSchema"
_PL = "io.k8s.api.flowcontrol.v1.PriorityLevelConfiguration"


def _missing_pl(obj: dict[str, Any]) -> str:
    for c in dig(obj, "status", "conditions", default=None) or ():
        if c.get("type") == "Dangling":
            return {"True": "True", "False": "False"}.get(c.get("status"), "?")
    return "?"


FLOW_SCHEMA = Printer(
    (
        name_column(),
        Column("PriorityLevel", doc=(_FS, "spec.priorityLevelConfiguration.name")),
        Column("MatchingPrecedence", type="integer", doc=(_FS, "spec.matchingPrecedence")),
        Column("DistinguisherMethod", doc=(_FS, "spec.distinguisherMethod.type")),
        age_column(),
        Column("MissingPL", doc=(_FS, "status.conditions")),
    ),
    lambda obj, now: [
        dig(obj, "metadata", "name", default=""),
        dig(obj, "spec", "priorityLevelConfiguration", "name", default=""),
        int(dig(obj, "spec", "matchingPrecedence", default=0) or 0),
        dig(obj, "spec", "distinguisherMethod", "type", default=None) or "*",
        object_age(obj, now),
        _missing_pl(obj),
    ],
)


def _level_cells(obj: dict[str, Any]) -> list[Any]:
    limited = dig(obj, "spec", "limited", default=None) or {}
    queuing = dig(limited, "limitResponse", "queuing", default=None) if limited else None
    shares: Any = limited.get("nominalConcurrencyShares", "<none>") if dig(obj, "spec", "type", default="") == "Limited" else "<none>"
    if queuing:
        return [shares, queuing.get("queues", 0), queuing.get("handSize", 0), queuing.get("queueLengthLimit", 0)]
    return [shares, "<none>", "<none>", "<none>"]


PRIORITY_LEVEL = Printer(
    (
        name_column(),
        Column("Type", doc=(_PL, "spec.type")),
        Column("NominalConcurrencyShares", doc=(_PL, "spec.limited.nominalConcurrencyShares")),
        Column("Queues", doc=(_PL, "spec.limited.limitResponse.queuing.queues")),
        Column("HandSize", doc=(_PL, "spec.limited.limitResponse.queuing.handSize")),
        Column("QueueLengthLimit", doc=(_PL, "spec.limited.limitResponse.queuing.queueLengthLimit")),
        age_column(),
    ),
    lambda obj, now: [dig(obj, "metadata", "name", default=""), dig(obj, "spec", "type", default=""),
                      *_level_cells(obj), object_age(obj, now)],
)

PRINTERS = {"FlowSchema": FLOW_SCHEMA, "PriorityLevelConfiguration": PRIORITY_LEVEL}
