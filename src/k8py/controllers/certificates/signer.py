"""``csrsigning``: sign approved CertificateSigningRequests of the built-in signers.

For each CSR that is Approved (and neither Denied nor Failed), has no
certificate yet, and names one of :data:`~.csr_checks.SIGNERS`:

- a request its signer may not grant (:func:`~.csr_checks.check_for_signer`)
  gets a ``Failed`` condition, reason ``SignerValidationFailure``;
- else it is signed by the cluster CA (``--cluster-signing-cert-file`` /
  ``--cluster-signing-key-file``) with its subject, SANs and extended key
  usages, living ``spec.expirationSeconds`` or ``--cluster-signing-duration``,
  whichever is shorter (and never past the CA), and ``status.certificate``
  is written through ``/status``.

Without the CA files the controller is not started (as upstream). Queue
``certificate``: CSR names; the CSR informer is the only input.
"""

from __future__ import annotations

import base64
import datetime as dt
import logging
from typing import Any

from k8py.api.errors import Conflict, NotFound
from k8py.client.certs import CertificateAuthority, encode_cert_pem
from k8py.client.resources import CERTIFICATE_SIGNING_REQUESTS
from k8py.controllers.certificates import csr_checks
from k8py.controllers.context import ControllerContext
from k8py.controllers.keyed_controller import KeyedController

__all__ = ["CSRSigningController", "new_controller"]

logger = logging.getLogger(__name__)


class CSRSigningController(KeyedController):
    def __init__(self, ctx: ControllerContext, ca: CertificateAuthority) -> None:
        super().__init__(ctx, name="csrsigning", queue_name="certificate")
        self.ca = ca
        self.max_duration = ctx.options.cluster_signing_duration
        self.csrs = ctx.informers.informer(CERTIFICATE_SIGNING_REQUESTS)
        self.wait_for(self.csrs)
        self.csrs.add_event_handler(on_add=self.enqueue, on_update=lambda old, new: self.enqueue(new))

    async def sync(self, key: str) -> None:
        csr = self.csrs.lister.try_get(None, key)
        if csr is None or not csr_checks.is_approved(csr) or (csr.get("status") or {}).get("certificate"):
            return
        if (csr.get("spec") or {}).get("signerName") not in csr_checks.SIGNERS:
            return
        try:
            request = csr_checks.parse_request(csr)
        except ValueError as err:
            await self._fail(csr, f"unable to parse csr: {err}")
            return
        problem = csr_checks.check_for_signer(csr, request)
        if problem:
            await self._fail(csr, problem)
            return
        spec = csr.get("spec") or {}
        seconds = float(spec.get("expirationSeconds") or self.max_duration)
        validity = dt.timedelta(seconds=min(seconds, self.max_duration))
        cert = self.ca.sign_csr(request, usages=csr_checks.extended_usages(list(spec.get("usages") or ())), validity=validity)
        status = dict(csr.get("status") or {})
        status["certificate"] = base64.b64encode(encode_cert_pem(cert)).decode()
        await self._write_status(csr, status)
        logger.info("signed certificate", extra={"csr": key, "signer": spec.get("signerName")})

    async def _fail(self, csr: dict[str, Any], message: str) -> None:
        now = self.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        status = dict(csr.get("status") or {})
        status["conditions"] = [*(status.get("conditions") or ()), {
            "type": "Failed", "status": "True", "reason": "SignerValidationFailure", "message": message,
            "lastUpdateTime": now, "lastTransitionTime": now,
        }]
        await self._write_status(csr, status)

    async def _write_status(self, csr: dict[str, Any], status: dict[str, Any]) -> None:
        try:
            await self.client.update_status(CERTIFICATE_SIGNING_REQUESTS, {**csr, "status": status})
        except NotFound:
            return
        except Conflict:
            self.enqueue(csr)  # changed meanwhile: the informer brings the new one


def new_controller(ctx: ControllerContext) -> CSRSigningController | None:
    opts = ctx.options
    if not opts.cluster_signing_cert_file or not opts.cluster_signing_key_file:
        logger.warning("csrsigning not started: give --cluster-signing-cert-file and --cluster-signing-key-file")
        return None
    return CSRSigningController(ctx, CertificateAuthority.load(opts.cluster_signing_cert_file, opts.cluster_signing_key_file))
