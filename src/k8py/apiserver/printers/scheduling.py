"""Printer for ``scheduling.k8s.io`` PriorityClasses:
``NAME  VALUE  GLOBAL-DEFAULT  AGE  PREEMPTIONPOLICY`` (upstream's printPriorityClass)."""

from __future__ import annotations

from .cells import dig, object_age
from .columns import Column, Printer, age_column, name_column

__all__ = ["PRINTERS"]

_PC = "io.k8s.api.scheduling.v1.PriorityClass"

PRIORITY_CLASS = Printer(
    (
        name_column(),
        Column("Value", type="integer", doc=(_PC, "value")),
        Column("Global-Default", type="boolean", doc=(_PC, "globalDefault")),
        age_column(),
        Column("PreemptionPolicy", doc=(_PC, "preemptionPolicy")),
    ),
    lambda obj, now: [
        dig(obj, "metadata", "name", default=""),
        int(obj.get("value") or 0),
        bool(obj.get("globalDefault")),
        object_age(obj, now),
        obj.get("preemptionPolicy") or "",
    ],
)

PRINTERS = {"PriorityClass": PRIORITY_CLASS}
