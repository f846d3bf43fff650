"""Printer for ``coordination.k8s.io`` Leases: ``NAME  HOLDER  AGE``.

HOLDER is ``spec.holderIdentity``, empty (not ``<none>``) when nobody holds
the lease, as upstream prints it.
"""

from __future__ import annotations

from .cells import object_age, dig
from .columns import Column, Printer, age_column, name_column

__all__ = ["PRINTERS"]

LEASE = Printer(
    (
        name_column(),
        Column("Holder", doc=("io.k8s.api.coordination.v1.LeaseSpec", "holderIdentity")),
        age_column(),
    ),
    lambda obj, now: [
        dig(obj, "metadata", "name", default=""),
        dig(obj, "spec", "holderIdentity", default=""),
        object_age(obj, now),
    ],
)

PRINTERS = {"Lease": LEASE}
