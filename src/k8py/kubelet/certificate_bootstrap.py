"""Kubelet TLS bootstrap: turn a bootstrap token into the node's own client certificate.

``k8py kubelet --bootstrap-kubeconfig B --kubeconfig K`` (upstream
``pkg/kubelet/certificate/bootstrap``):

1. K exists and its client certificate is valid for a while yet: use it;
2. else, with the credentials in B (a bootstrap token), make a P-256 key and
   a CertificateSigningRequest for ``system:node:<node>`` in ``system:nodes``,
   signer ``kubernetes.io/kube-apiserver-client-kubelet``, usages
   ``digital signature`` and ``client auth``, named after the key so that a
   restarted kubelet finds its own request again;
3. wait until the CSR is approved (the ``csrapproving`` controller does it for
   bootstrap tokens; or ``kubectl certificate approve``) and signed, failing on
   Denied or Failed with the condition's message;
4. write the certificate and key to ``<cert-dir>/kubelet-client-current.pem``
   (0600) and K pointing at B's server and CA with that file.

Everything after uses K. The key is written before the request is made
(``kubelet-client.key.tmp``), so a kubelet restarted while waiting asks with
the same key.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import hashlib
import logging
import os
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from k8py.api.errors import AlreadyExists, NotFound
from k8py.client import certs
from k8py.client.config import ClientConfig
from k8py.client.kubeconfig import load_kubeconfig
from k8py.client.resources import CERTIFICATE_SIGNING_REQUESTS
from k8py.client.rest import RestClient

__all__ = ["bootstrap_client_certificate", "request_node_certificate", "client_certificate", "BootstrapError", "CURRENT_PEM"]

logger = logging.getLogger(__name__)

SIGNER = "kubernetes.io/kube-apiserver-client-kubelet"
CURRENT_PEM = "kubelet-client-current.pem"
PENDING_KEY = "kubelet-client.key.tmp"
#: a certificate closer than this to its end is replaced at start
RENEW_BEFORE = dt.timedelta(minutes=10)


class BootstrapError(RuntimeError):
    """The node could not get its certificate: says why and what to do."""


def client_certificate(config: ClientConfig) -> x509.Certificate | None:
    """The client certificate ``config`` presents (inline data, else its file); None if it has none or it cannot be read."""
    pem = config.cert_data
    if pem is None and config.cert_file:
        try:
            with open(config.cert_file, "rb") as f:
                pem = f.read()
        except OSError:
            return None
    if not pem:
        return None
    try:
        return x509.load_pem_x509_certificate(pem)
    except ValueError:
        return None


def _valid_kubeconfig(path: str, now: dt.datetime) -> bool:
    try:
        config = load_kubeconfig(path)
    except (OSError, ValueError):
        return False
    cert = client_certificate(config)
    return cert is not None and cert.not_valid_after_utc - RENEW_BEFORE > now


def _pending_key(cert_dir: str) -> certs.PrivateKey:
    path = os.path.join(cert_dir, PENDING_KEY)
    if os.path.exists(path):
        return certs.parse_private_key_pem(certs.read_pem(path))
    key = certs.new_private_key()
    certs.write_pem(path, certs.encode_private_key_pem(key), private=True)
    return key


def _csr_name(key: certs.PrivateKey, node_name: str, prefix: str = "node-csr-") -> str:
    der = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    digest = hashlib.sha256(der + node_name.encode()).digest()
    return prefix + digest.hex()[:40]  # lower-case: a valid object name


def _condition(csr: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    return next((c for c in (csr.get("status") or {}).get("conditions") or () if c.get("type") == ctype), None)


def _write_kubeconfig(path: str, bootstrap: ClientConfig, pem_path: str) -> None:
    cluster: dict[str, Any] = {"server": bootstrap.server}
    if bootstrap.ca_data:
        cluster["certificate-authority-data"] = base64.b64encode(bootstrap.ca_data).decode()
    elif bootstrap.ca_file:
        cluster["certificate-authority"] = os.path.abspath(bootstrap.ca_file)
    if bootstrap.insecure_skip_tls_verify:
        cluster["insecure-skip-tls-verify"] = True
    doc = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "default-cluster", "cluster": cluster}],
        "users": [{"name": "default-auth", "user": {"client-certificate": pem_path, "client-key": pem_path}}],
        "contexts": [{"name": "default-context", "context": {"cluster": "default-cluster", "user": "default-auth",
                                                             "namespace": "default"}}],
        "current-context": "default-context",
        "preferences": {},
    }
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False)
    os.replace(tmp, path)


async def request_node_certificate(client: RestClient, key: certs.PrivateKey, node_name: str, *,
                                   timeout: float = 3600.0, poll: float = 0.5, signer: str = SIGNER,
                                   usages: tuple[str, ...] = ("digital signature", "client auth"),
                                   dns_names: tuple[str, ...] = (), ips: tuple[str, ...] = (),
                                   name_prefix: str = "node-csr-") -> bytes:
    """A CSR for ``system:node:<node_name>`` with ``key``, made with ``client``'s credentials
    (a bootstrap token, or the node's current certificate when rotating); the signed
    certificate's PEM once approved and issued. Raises :class:`BootstrapError` on Denied,
    Failed, a deleted request or ``timeout``. A serving certificate asks ``signer``
    ``kubernetes.io/kubelet-serving`` with server usages and the node's names and addresses."""
    name = _csr_name(key, node_name, name_prefix)
    request = certs.new_csr(key, f"system:node:{node_name}", ("system:nodes",), dns_names=dns_names, ips=ips)
    body = {
        "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": name},
        "spec": {"request": base64.b64encode(request).decode(), "signerName": signer, "usages": list(usages)},
    }
    try:
        await client.create(CERTIFICATE_SIGNING_REQUESTS, body)
        logger.info("requested a certificate for the node", extra={"csr": name, "node": node_name, "signer": signer})
    except AlreadyExists:
        pass  # a restart while waiting: the same key, the same request
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            csr = await client.get(CERTIFICATE_SIGNING_REQUESTS, None, name)
        except NotFound:
            raise BootstrapError(f"the certificate signing request {name} was deleted before it was signed") from None
        for bad in ("Denied", "Failed"):
            cond = _condition(csr, bad)
            if cond is not None:
                raise BootstrapError(f"certificate signing request {name} was {bad.lower()}: "
                                     f"{cond.get('reason', '')} {cond.get('message', '')}".rstrip())
        pem = (csr.get("status") or {}).get("certificate")
        if pem:
            return base64.b64decode(pem)
        if loop.time() > deadline:
            raise BootstrapError(f"certificate signing request {name} not signed within {timeout:.0f}s: approve it "
                                 f"with kubectl certificate approve {name}, or run the csrapproving controller")
        await asyncio.sleep(poll)


async def bootstrap_client_certificate(
    *, bootstrap_kubeconfig: str, kubeconfig: str, cert_dir: str, node_name: str,
    timeout: float = 3600.0, poll: float = 0.5,
) -> bool:
    """Make sure ``kubeconfig`` holds a valid client certificate for ``node_name``.

    Returns False when it already did, True when a certificate was obtained;
    raises :class:`BootstrapError` when the request is denied, fails or times out."""
    now = dt.datetime.now(dt.timezone.utc)
    if _valid_kubeconfig(kubeconfig, now):
        return False
    try:
        bootstrap = load_kubeconfig(bootstrap_kubeconfig)
    except (OSError, ValueError) as err:
        raise BootstrapError(f"cannot read the bootstrap kubeconfig {bootstrap_kubeconfig}: {err}") from None
    os.makedirs(cert_dir, exist_ok=True)
    key = _pending_key(cert_dir)
    bootstrap.user_agent = f"k8py-kubelet-bootstrap ({node_name})"
    async with RestClient(bootstrap) as client:
        cert_pem = await request_node_certificate(client, key, node_name, timeout=timeout, poll=poll)
    pem_path = os.path.join(os.path.abspath(cert_dir), CURRENT_PEM)
    certs.write_pem(pem_path, cert_pem + certs.encode_private_key_pem(key), private=True)
    os.unlink(os.path.join(cert_dir, PENDING_KEY))
    _write_kubeconfig(kubeconfig, bootstrap, pem_path)
    logger.info("wrote the node's kubeconfig with its client certificate", extra={"kubeconfig": kubeconfig})
    return True
