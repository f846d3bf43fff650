"""Printer for ``policy`` PodDisruptionBudgets:
``NAME  MIN AVAILABLE  MAX UNAVAILABLE  ALLOWED DISRUPTIONS  AGE`` (upstream's printPodDisruptionBudget)."""

from __future__ import annotations

from .cells import dig, object_age
from .columns import Column, Printer, age_column, name_column

__all__ = ["PRINTERS"]

_PDB = "io.k8s.api.policy.v1.PodDisruptionBudget"


def _or_na(value: object) -> str:
    return "N/A" if value is None else str(value)


PDB = Printer(
    (
        name_column(),
        Column("Min Available", doc=(_PDB + "Spec", "minAvailable")),
        Column("Max Unavailable", doc=(_PDB + "Spec", "maxUnavailable")),
        Column("Allowed Disruptions", type="integer", doc=(_PDB + "Status", "disruptionsAllowed")),
        age_column(),
    ),
    lambda obj, now: [
        dig(obj, "metadata", "name", default=""),
        _or_na(dig(obj, "spec", "minAvailable")),
        _or_na(dig(obj, "spec", "maxUnavailable")),
        int(dig(obj, "status", "disruptionsAllowed", default=0) or 0),
        object_age(obj, now),
    ],
)

PRINTERS = {"PodDisruptionBudget": PDB}
