"""Kubelet client-certificate rotation (upstream's ``RotateKubeletClientCertificate``).

:class:`ClientCertificateRotation` keeps the node's client certificate fresh,
as upstream's certificate manager does:

- the *rotation deadline* of a certificate is ``notBefore + (0.7 + 0.2 * r) *
  (notAfter - notBefore)`` for a random ``r`` in [0, 1) drawn once per
  certificate (70–90 % of its life: nodes that got theirs together do not all
  renew at once);
- at the deadline it makes a new P-256 key and a CSR for
  ``system:node:<name>`` with the node's *current* certificate (a renewal:
  the ``csrapproving`` controller approves it when ``system:nodes`` may
  ``create certificatesigningrequests/selfnodeclient``), waits for it to be
  signed (:func:`~k8py.kubelet.certificate_bootstrap.request_node_certificate`);
- writes certificate and key to ``<cert-dir>/kubelet-client-current.pem``
  (atomically, 0600; the kubeconfig TLS bootstrap writes points there), puts
  them in the client's configuration, and closes the client's connections so
  every new one shows the new certificate (upstream closes them too); watches
  reconnect;
- a failed attempt is retried after ``retry`` seconds (doubling, at most 5 min).

Time comes from ``clock`` (wall time, a timezone-aware datetime) and waiting from
``sleep``, both injectable: tests move the clock past the deadline instead of
waiting. The loop sleeps at most ``max_nap`` seconds at a time, so a clock
that jumps is noticed soon.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import random
from typing import Awaitable, Callable

from cryptography import x509

from k8py.api.errors import StatusError
from k8py.client import certs
from k8py.client.config import ClientConfig
from k8py.client.rest import RestClient
from k8py.kubelet.certificate_bootstrap import CURRENT_PEM, BootstrapError, client_certificate, request_node_certificate

__all__ = ["ClientCertificateRotation", "rotation_deadline", "prefer_rotated"]

logger = logging.getLogger(__name__)


def rotation_deadline(cert: x509.Certificate, r: float) -> dt.datetime:
    """When ``cert`` is renewed: at 70 % + 20 % * ``r`` of its life."""
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    return start + (end - start) * (0.7 + 0.2 * r)


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def prefer_rotated(config: ClientConfig, cert_dir: str, *, now: dt.datetime | None = None) -> bool:
    """Use ``<cert_dir>/kubelet-client-current.pem`` instead of the kubeconfig's certificate when it is a
    later one for the same node that is still valid (a kubelet restarted after a rotation), as upstream's
    certificate store is read before the kubeconfig's files. True if it switched."""
    path = os.path.join(os.path.abspath(cert_dir), CURRENT_PEM)
    try:
        with open(path, "rb") as f:
            pem = f.read()
        rotated = x509.load_pem_x509_certificate(pem)
        key = certs.parse_private_key_pem(pem)
    except (OSError, ValueError):
        return False
    current = client_certificate(config)
    moment = now or _utcnow()
    if rotated.not_valid_after_utc <= moment or rotated.not_valid_before_utc > moment:
        return False
    if current is not None and (certs.cert_subject(current) != certs.cert_subject(rotated)
                                or rotated.not_valid_after_utc <= current.not_valid_after_utc):
        return False
    config.cert_data, config.key_data = certs.encode_cert_pem(rotated), certs.encode_private_key_pem(key)
    config.cert_file = config.key_file = None
    logger.info("using the rotated client certificate", extra={"file": path,
                                                                "expires": rotated.not_valid_after_utc.isoformat()})
    return True


class ClientCertificateRotation:
    def __init__(self, client: RestClient, *, node_name: str, cert_dir: str,
                 clock: Callable[[], dt.datetime] = _utcnow, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                 rng: Callable[[], float] = random.random, poll: float = 1.0, request_timeout: float = 900.0,
                 retry: float = 5.0, max_nap: float = 60.0) -> None:
        self.client, self.node_name, self.cert_dir = client, node_name, cert_dir
        self.clock, self.sleep, self.rng = clock, sleep, rng
        self.poll, self.request_timeout, self.retry, self.max_nap = poll, request_timeout, retry, max_nap
        #: how many certificates this rotation has put in place
        self.rotations = 0
        self._deadline: tuple[int, dt.datetime] | None = None

    def certificate(self) -> x509.Certificate | None:
        """The client certificate the node uses now (from its client's configuration)."""
        return client_certificate(self.client.config)

    def deadline(self) -> dt.datetime | None:
        """The current certificate's rotation deadline (its jitter drawn once per certificate)."""
        cert = self.certificate()
        if cert is None:
            return None
        if self._deadline is None or self._deadline[0] != cert.serial_number:
            self._deadline = (cert.serial_number, rotation_deadline(cert, self.rng()))
        return self._deadline[1]

    async def rotate(self) -> x509.Certificate:
        """Get a new certificate now and switch the client to it."""
        key = certs.new_private_key()
        cert_pem = await request_node_certificate(self.client, key, self.node_name, timeout=self.request_timeout, poll=self.poll)
        key_pem = certs.encode_private_key_pem(key)
        pem_path = os.path.join(os.path.abspath(self.cert_dir), CURRENT_PEM)
        certs.write_pem(pem_path, cert_pem + key_pem, private=True)
        config = self.client.config
        config.cert_data, config.key_data, config.cert_file, config.key_file = cert_pem, key_pem, None, None
        await self.client.transport.close()  # the next connection presents the new certificate
        self.rotations += 1
        cert = x509.load_pem_x509_certificate(cert_pem)
        logger.info("rotated the node's client certificate",
                    extra={"node": self.node_name, "expires": cert.not_valid_after_utc.isoformat(), "file": pem_path})
        return cert

    async def run(self) -> None:
        """Rotate at every deadline until cancelled."""
        backoff = self.retry
        while True:
            deadline = self.deadline()
            if deadline is None:
                logger.warning("the kubelet's client has no certificate to rotate; client-certificate rotation stops")
                return
            wait = (deadline - self.clock()).total_seconds()
            if wait > 0:
                await self.sleep(min(wait, self.max_nap))
                continue
            try:
                await self.rotate()
                backoff = self.retry
            except (BootstrapError, StatusError, OSError) as err:
                logger.warning("client-certificate rotation failed; retrying",
                               extra={"error": str(err), "retry_seconds": backoff})
                await self.sleep(backoff)
                backoff = min(backoff * 2, 300.0)
