"""Kubelet serving certificates from the cluster (``serverTLSBootstrap``; upstream's RotateKubeletServerCertificate).

With ``serverTLSBootstrap: true`` and no ``--tls-cert-file``, the kubelet's
HTTPS server gets its certificate from the API, as upstream's serving
certificate manager does:

- at start, ``<cert-dir>/kubelet-server-current.pem`` (certificate and key)
  if it is there and not expired; else nothing: until the cluster's
  certificate is issued the server listens but every TLS handshake is
  aborted with an ``internal_error`` alert, as upstream's ``GetCertificate``
  ("no serving certificate available for the kubelet") makes Go's TLS stack
  do — the kubelet presents no certificate it cannot vouch for, and clients
  (the API server's logs/exec requests, a probe of ``/healthz`` on the port)
  fail until it can. (asyncio's TLS transport closes a failed server
  handshake without flushing the alert OpenSSL wrote, so a client of k8py's
  kubelet sees the connection reset during the handshake instead of the
  ``tls: internal error`` alert; either way no certificate is presented);
- then a CSR for signer ``kubernetes.io/kubelet-serving``: ``system:node:<name>``
  in ``system:nodes``, usages ``digital signature`` and ``server auth``, the
  node's name as DNS name and its address as IP SAN, made with the node's own
  client credentials. Serving CSRs are **not** auto-approved (the
  ``csrapproving`` controller approves only client ones, as upstream): a
  cluster admin (``kubectl certificate approve``) or an approver of the
  cluster's choosing does it; the kubelet waits, asking again after
  ``request_timeout`` with a hint in its log;
- once signed, the certificate and key go to ``kubelet-server-current.pem``
  (atomically, 0600) and into the server's SSL context in place: every new
  connection gets the new certificate, open ones keep theirs;
- it is renewed the same way at 70–90 % of its life
  (:func:`~k8py.kubelet.certificate_rotation.rotation_deadline`).

Time from ``clock`` and waiting from ``sleep``, both injectable, as for the
client certificate's rotation.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import logging
import os
import random
import ssl
from typing import Awaitable, Callable, Sequence

from cryptography import x509

from k8py.api.errors import StatusError
from k8py.client import certs
from k8py.client.rest import RestClient
from k8py.kubelet.certificate_bootstrap import BootstrapError, request_node_certificate
from k8py.kubelet.certificate_rotation import rotation_deadline

__all__ = ["ServingCertificate", "SERVING_SIGNER", "SERVING_PEM"]

logger = logging.getLogger(__name__)

SERVING_SIGNER = "kubernetes.io/kubelet-serving"
SERVING_PEM = "kubelet-server-current.pem"
_USAGES = ("digital signature", "server auth")


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def _ips(addresses: Sequence[str]) -> tuple[str, ...]:
    out = []
    for address in addresses:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            continue
        if not ip.is_unspecified:
            out.append(str(ip))
    return tuple(out)


class ServingCertificate:
    def __init__(self, client: RestClient, *, node_name: str, cert_dir: str, addresses: Sequence[str] = (),
                 hostnames: Sequence[str] = (), client_ca_file: str = "",
                 clock: Callable[[], dt.datetime] = _utcnow, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                 rng: Callable[[], float] = random.random, poll: float = 1.0, request_timeout: float = 900.0,
                 retry: float = 5.0, max_nap: float = 60.0) -> None:
        self.client, self.node_name, self.cert_dir = client, node_name, os.path.abspath(cert_dir)
        self.ips = _ips(addresses)
        self.dns_names = tuple(dict.fromkeys(h for h in (node_name, *hostnames) if h))
        self.clock, self.sleep, self.rng = clock, sleep, rng
        self.poll, self.request_timeout, self.retry, self.max_nap = poll, request_timeout, retry, max_nap
        #: how many certificates from the cluster this manager has put in place
        self.rotations = 0
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        if client_ca_file:
            self.context.load_verify_locations(cafile=client_ca_file)
            self.context.verify_mode = ssl.CERT_OPTIONAL
        self._cert: x509.Certificate | None = None
        self._r = rng()
        self._refused = 0
        self.context.sni_callback = self._no_certificate_yet  # called on every ClientHello, SNI or not
        self._load_current()

    @property
    def pem_path(self) -> str:
        return os.path.join(self.cert_dir, SERVING_PEM)

    def certificate(self) -> x509.Certificate | None:
        """The cluster-issued certificate the server presents now (None until there is one: no TLS is served)."""
        return self._cert

    def deadline(self) -> dt.datetime | None:
        return rotation_deadline(self._cert, self._r) if self._cert is not None else None

    def _load_current(self) -> bool:
        try:
            with open(self.pem_path, "rb") as f:
                pem = f.read()
            cert = x509.load_pem_x509_certificate(pem)
        except (OSError, ValueError):
            return False
        if cert.not_valid_after_utc <= self.clock():
            return False
        self.context.load_cert_chain(self.pem_path)
        self._cert = cert
        return True

    def _no_certificate_yet(self, sock: ssl.SSLObject, server_name: str | None, context: ssl.SSLContext) -> int | None:
        """Abort the handshake while there is no certificate from the cluster (upstream's GetCertificate error)."""
        if self._cert is not None:
            return None
        self._refused += 1
        if self._refused == 1 or self._refused % 100 == 0:
            logger.warning("no serving certificate available for the kubelet: TLS handshake refused until the cluster "
                           "issues one (approve the node's kubernetes.io/kubelet-serving CSR)",
                           extra={"node": self.node_name, "refused": self._refused})
        return ssl.ALERT_DESCRIPTION_INTERNAL_ERROR

    async def rotate(self) -> x509.Certificate:
        """Ask the cluster for a serving certificate now, wait for it, and serve with it."""
        key = certs.new_private_key()
        cert_pem = await request_node_certificate(
            self.client, key, self.node_name, timeout=self.request_timeout, poll=self.poll, signer=SERVING_SIGNER,
            usages=_USAGES, dns_names=self.dns_names, ips=self.ips, name_prefix="csr-")
        certs.write_pem(self.pem_path, cert_pem + certs.encode_private_key_pem(key), private=True)
        self.context.load_cert_chain(self.pem_path)  # new handshakes present it
        self._cert = x509.load_pem_x509_certificate(cert_pem)
        self._r = self.rng()
        self.rotations += 1
        logger.info("serving with the node's certificate from the cluster",
                    extra={"node": self.node_name, "expires": self._cert.not_valid_after_utc.isoformat(), "file": self.pem_path})
        return self._cert

    async def run(self) -> None:
        """Get the certificate if there is none, then renew at every deadline, until cancelled."""
        backoff = self.retry
        while True:
            deadline = self.deadline()
            if deadline is not None:
                wait = (deadline - self.clock()).total_seconds()
                if wait > 0:
                    await self.sleep(min(wait, self.max_nap))
                    continue
            try:
                await self.rotate()
                backoff = self.retry
            except (BootstrapError, StatusError, OSError) as err:
                logger.warning("no serving certificate from the cluster yet; asking again (approve the node's "
                               "kubernetes.io/kubelet-serving CSR: kubectl certificate approve <name>)",
                               extra={"error": str(err), "retry_seconds": backoff})
                await self.sleep(backoff)
                backoff = min(backoff * 2, 300.0)
