"""``csrapproving``: approve kubelets' client certificate requests, as upstream's ``sarapprove``.

A CSR for ``kubernetes.io/kube-apiserver-client-kubelet`` that is neither
approved nor denied, and asks for a node client certificate
(``system:node:<name>`` in ``system:nodes``, client usages, no SANs):

- from that very node (``spec.username`` is the request's CN): a renewal,
  allowed if the requester may ``create`` ``certificatesigningrequests/selfnodeclient``;
- from anyone else (a bootstrap token): allowed if the requester may
  ``create`` ``certificatesigningrequests/nodeclient``;

each asked with a SubjectAccessReview for the CSR's user, groups and extra.
An allowed CSR gets ``Approved`` (reason ``AutoApproved``) through
``/approval``; anything else is left for a human (``kubectl certificate
approve``). A server that serves no SubjectAccessReview (authorization off)
is answered by the bootstrap policy's grants instead: ``system:bootstrappers``
may ask for ``nodeclient``, ``system:nodes`` for ``selfnodeclient``.
"""

from __future__ import annotations

import logging
from typing import Any

from k8py.api.errors import Conflict, NotFound
from k8py.client.resource import Resource
from k8py.client.resources import CERTIFICATE_SIGNING_REQUESTS
from k8py.controllers.certificates import csr_checks
from k8py.controllers.context import ControllerContext
from k8py.controllers.keyed_controller import KeyedController

__all__ = ["CSRApprovingController", "new_controller"]

logger = logging.getLogger(__name__)

SUBJECT_ACCESS_REVIEWS = Resource("authorization.k8s.io", "v1", "subjectaccessreviews", False, "SubjectAccessReview")

SELF_NODE_CLIENT = ("selfnodeclient", "Auto approving self kubelet client certificate after SubjectAccessReview.")
NODE_CLIENT = ("nodeclient", "Auto approving kubelet client certificate after SubjectAccessReview.")
_FALLBACK_GROUPS = {"selfnodeclient": "system:nodes", "nodeclient": "system:bootstrappers"}


class CSRApprovingController(KeyedController):
    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, name="csrapproving", queue_name="csrapproving")
        self.csrs = ctx.informers.informer(CERTIFICATE_SIGNING_REQUESTS)
        self.wait_for(self.csrs)
        self.csrs.add_event_handler(on_add=self.enqueue, on_update=lambda old, new: self.enqueue(new))

    async def sync(self, key: str) -> None:
        csr = self.csrs.lister.try_get(None, key)
        if csr is None or csr_checks.condition(csr, "Approved") or csr_checks.is_denied_or_failed(csr):
            return
        spec = csr.get("spec") or {}
        if spec.get("signerName") != csr_checks.CLIENT_KUBELET:
            return
        try:
            request = csr_checks.parse_request(csr)
        except ValueError:
            return
        if not csr_checks.is_node_client(csr, request):
            return
        cn, _ = csr_checks.subject(request)
        subresource, message = SELF_NODE_CLIENT if spec.get("username") == cn else NODE_CLIENT
        if not await self._allowed(spec, subresource):
            return
        now = self.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        status = dict(csr.get("status") or {})
        status["conditions"] = [*(status.get("conditions") or ()), {
            "type": "Approved", "status": "True", "reason": "AutoApproved", "message": message,
            "lastUpdateTime": now, "lastTransitionTime": now,
        }]
        try:
            await self.client.update(CERTIFICATE_SIGNING_REQUESTS, {**csr, "status": status}, subresource="approval")
        except NotFound:
            return
        except Conflict:
            self.enqueue(csr)
            return
        logger.info("approved kubelet client certificate", extra={"csr": key, "username": spec.get("username")})

    async def _allowed(self, spec: dict[str, Any], subresource: str) -> bool:
        review = {
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {
                "user": spec.get("username", ""), "uid": spec.get("uid", ""), "groups": list(spec.get("groups") or ()),
                "extra": spec.get("extra") or {},
                "resourceAttributes": {"group": "certificates.k8s.io", "resource": "certificatesigningrequests",
                                       "verb": "create", "subresource": subresource},
            },
        }
        try:
            reply = await self.client.create(SUBJECT_ACCESS_REVIEWS, review)
        except NotFound:
            return _FALLBACK_GROUPS[subresource] in (spec.get("groups") or ())
        return bool((reply.get("status") or {}).get("allowed"))


def new_controller(ctx: ControllerContext) -> CSRApprovingController:
    return CSRApprovingController(ctx)
