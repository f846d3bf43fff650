"""Printer for ``certificates.k8s.io`` CSRs: ``NAME  AGE  SIGNERNAME  REQUESTOR  REQUESTEDDURATION  CONDITION``.

CONDITION is upstream's ``extractCSRStatus``: Denied, else Approved, else
Pending; then ``,Failed`` and ``,Issued`` (a certificate is there).
REQUESTEDDURATION is ``spec.expirationSeconds`` as a human duration, or
``<none>``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from .cells import dig, object_age
from .columns import Column, Printer, age_column, name_column
from .durations import human_duration

__all__ = ["PRINTERS"]

_SPEC = "io.k8s.api.certificates.v1.CertificateSigningRequestSpec"
_STATUS = "io.k8s.api.certificates.v1.CertificateSigningRequestStatus"


def csr_condition(obj: dict[str, Any]) -> str:
    types = {c.get("type") for c in dig(obj, "status", "conditions", default=None) or ()}
    status = "Denied" if "Denied" in types else "Approved" if "Approved" in types else "Pending"
    if "Failed" in types:
        status += ",Failed"
    if dig(obj, "status", "certificate", default=""):
        status += ",Issued"
    return status


def _duration(obj: dict[str, Any]) -> str:
    seconds = dig(obj, "spec", "expirationSeconds", default=None)
    return "<none>" if seconds is None else human_duration(timedelta(seconds=int(seconds)))


CSR = Printer(
    (
        name_column(),
        age_column(),
        Column("SignerName", doc=(_SPEC, "signerName")),
        Column("Requestor", doc="Name of the requestor"),
        Column("RequestedDuration", doc=(_SPEC, "expirationSeconds")),
        Column("Condition", doc=(_STATUS, "conditions")),
    ),
    lambda obj, now: [
        dig(obj, "metadata", "name", default=""),
        object_age(obj, now),
        dig(obj, "spec", "signerName", default=""),
        dig(obj, "spec", "username", default=""),
        _duration(obj),
        csr_condition(obj),
    ],
)

PRINTERS = {"CertificateSigningRequest": CSR}
