"""Printers for ``flowcontrol.apiserver.k8s.io``, as upstream's:
FlowSchema ``NAME  PRIORITYLEVEL  MATCHINGPRECEDENCE  DISTINGUISHERMETHOD  AGE  MISSINGPL`` and
PriorityLevelConfiguration ``NAME  TYPE  NOMINALCONCURRENCYSHARES  QUEUES  HANDSIZE  QUEUELENGTHLIMIT  AGE``
(``<none>`` where a level has no such setting; MISSINGPL from the ``Dangling`` condition, ``?`` without one)."""

from __future__ import annotations

from typing import Any

from .cells import dig, object_age
from .columns import Column, Printer, age_column, name_column

__all__ = ["PRINTERS"]

def _missing_pl(obj: dict[str, Any]) -> str:
    for c in dig(obj, "status", "conditions", default=None) or ():
        if c.get("type") == "Dangling":
            return {"True": "True", "False": "False"}.get(c.get("status"), "?")
    return "?"


FLOW_SCHEMA = Printer(
    (
        name_column(),
        Column("PriorityLevel", doc="`name` is the name of the priority level configuration being referenced"),
        Column("MatchingPrecedence", type="integer", doc="`matchingPrecedence` is used to choose among the FlowSchemas that match a given request."),
        Column("DistinguisherMethod", doc="`type` is the type of flow distinguisher method"),
        age_column(),
        Column("MissingPL", doc="Whether the referenced PriorityLevelConfiguration is missing (the Dangling condition)"),
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
        Column("Type", doc="`type` indicates whether this priority level is subject to limitation on request execution."),
        Column("NominalConcurrencyShares", doc="`nominalConcurrencyShares` (NCS) contributes to the computation of the NominalConcurrencyLimit (NominalCL) of this level."),
        Column("Queues", doc="`queues` is the number of queues for this priority level."),
        Column("HandSize", doc="`handSize` is a small positive number that configures the shuffle sharding of requests into queues."),
        Column("QueueLengthLimit", doc="`queueLengthLimit` is the maximum number of requests allowed to be waiting in a given queue of this priority level at a time"),
        age_column(),
    ),
    lambda obj, now: [dig(obj, "metadata", "name", default=""), dig(obj, "spec", "type", default=""),
                      *_level_cells(obj), object_age(obj, now)],
)

PRINTERS = {"FlowSchema": FLOW_SCHEMA, "PriorityLevelConfiguration": PRIORITY_LEVEL}
