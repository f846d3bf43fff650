"""certificates.k8s.io/v1: CertificateSigningRequests, with ``status`` and ``approval``.

Three writers, three views of one object, as upstream's strategies:

- the main resource: ``spec`` (immutable once created) — ``spec.username``,
  ``uid``, ``groups`` and ``extra`` are the requester's, filled by the server
  from the authenticated user, never from the body; ``status`` is ignored;
- ``/status`` (the signer): ``status.certificate`` and conditions other than
  Approved/Denied, which it can neither add nor remove;
- ``/approval`` (``kubectl certificate approve|deny``, the approver
  controller): only the Approved/Denied conditions
  (:mod:`k8py.apiserver.handlers.csr_approval`).
"""

from __future__ import annotations

from typing import Any

from k8py.apiserver.registry import ResourceDefinition
from k8py.apiserver.resources.strategies import StandardStrategy, path_getter

GROUP = "certificates.k8s.io"
APPROVAL_TYPES = ("Approved", "Denied")

Object = dict[str, Any]


def keep_approval(new_conditions: list[Object], old_conditions: list[Object]) -> list[Object]:
    """``new_conditions`` without Approved/Denied, plus the old ones of those types (``/status``)."""
    return [c for c in new_conditions if c.get("type") not in APPROVAL_TYPES] + [
        c for c in old_conditions if c.get("type") in APPROVAL_TYPES
    ]


class CSRStrategy(StandardStrategy):
    def prepare_for_status_update(self, obj: Object, old: Object) -> None:
        super().prepare_for_status_update(obj, old)
        status = obj.get("status") or {}
        old_status = old.get("status") or {}
        status["conditions"] = keep_approval(list(status.get("conditions") or ()), list(old_status.get("conditions") or ()))
        if not status["conditions"]:
            status.pop("conditions")
        obj["status"] = status


DEFINITIONS = [
    ResourceDefinition(
        group=GROUP,
        version="v1",
        kind="CertificateSigningRequest",
        plural="certificatesigningrequests",
        singular="certificatesigningrequest",
        namespaced=False,
        short_names=("csr",),
        subresources=frozenset({"status", "approval"}),
        strategy=CSRStrategy(GROUP, "v1", "CertificateSigningRequest", has_status=True),
        field_getters={"spec.signerName": path_getter("spec", "signerName")},
        openapi_name="io.k8s.api.certificates.v1.CertificateSigningRequest",
    ),
]
