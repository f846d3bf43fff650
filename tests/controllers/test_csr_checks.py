"""What each built-in signer may grant (csr_checks), as a table over real x509 requests."""

from __future__ import annotations

import base64
import ipaddress

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.x509.oid import NameOID

from k8py.client import certs
from k8py.controllers.certificates import csr_checks


def _csr(signer: str, usages: list[str], cn: str, orgs: tuple[str, ...] = (), *, dns: tuple[str, ...] = (),
         ips: tuple[str, ...] = (), emails: tuple[str, ...] = (), username: str = "") -> dict:
    names = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs] + [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    builder = x509.CertificateSigningRequestBuilder().subject_name(x509.Name(names))
    sans = [x509.DNSName(d) for d in dns] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips] + [x509.RFC822Name(e) for e in emails]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    pem = certs.encode_csr_pem(builder.sign(certs.new_private_key(), hashes.SHA256()))
    return {"spec": {"request": base64.b64encode(pem).decode(), "signerName": signer, "usages": usages, "username": username}}


NODE = ("system:nodes",)
CASES = [
    (csr_checks.CLIENT, ["client auth", "digital signature"], "alice", (), {}, ""),
    (csr_checks.CLIENT, ["server auth"], "alice", (), {}, "invalid usage for client certificate: server auth"),
    (csr_checks.CLIENT, ["digital signature"], "alice", (), {}, "missing required usage for client certificate: client auth"),
    (csr_checks.CLIENT_KUBELET, ["digital signature", "client auth"], "system:node:n1", NODE, {}, ""),
    (csr_checks.CLIENT_KUBELET, ["client auth"], "system:node:n1", ("other",), {}, "subject organization is not system:nodes"),
    (csr_checks.CLIENT_KUBELET, ["client auth"], "bob", NODE, {}, 'subject common name does not begin with "system:node:"'),
    (csr_checks.CLIENT_KUBELET, ["client auth"], "system:node:n1", NODE, {"dns": ("n1",)},
     "subject alternative names are not allowed for kubelet client certificates"),
    (csr_checks.KUBELET_SERVING, ["server auth", "digital signature", "key encipherment"], "system:node:n1", NODE,
     {"dns": ("n1",), "ips": ("127.0.0.1",)}, ""),
    (csr_checks.KUBELET_SERVING, ["server auth"], "system:node:n1", NODE, {}, "DNS or IP subjectAltName is required"),
    (csr_checks.KUBELET_SERVING, ["server auth"], "system:node:n1", NODE, {"emails": ("a@b.c",)},
     "email and URI subjectAltNames are not allowed"),
    (csr_checks.KUBELET_SERVING, ["client auth"], "system:node:n1", NODE, {"dns": ("n1",)},
     "invalid usage for serving certificate: client auth"),
]


@pytest.mark.parametrize(("signer", "usages", "cn", "orgs", "sans", "problem"), CASES)
def test_each_signer_grants_only_what_it_may(signer, usages, cn, orgs, sans, problem) -> None:  # type: ignore[no-untyped-def]
    csr = _csr(signer, usages, cn, orgs, **sans)
    assert csr_checks.check_for_signer(csr, csr_checks.parse_request(csr)) == problem


def test_node_client_requests_are_recognised_and_self_renewals_told_apart() -> None:
    bootstrap = _csr(csr_checks.CLIENT_KUBELET, ["digital signature", "client auth"], "system:node:n1", NODE, username="system:bootstrap:abcdef")
    assert csr_checks.is_node_client(bootstrap, csr_checks.parse_request(bootstrap))
    server = _csr(csr_checks.CLIENT_KUBELET, ["server auth"], "system:node:n1", NODE)
    assert not csr_checks.is_node_client(server, csr_checks.parse_request(server))
    stranger = _csr(csr_checks.CLIENT_KUBELET, ["client auth"], "system:node:n1", ("system:masters",))
    assert not csr_checks.is_node_client(stranger, csr_checks.parse_request(stranger))


def test_approval_state_reads_the_conditions() -> None:
    csr = {"status": {"conditions": [{"type": "Approved", "status": "True"}]}}
    assert csr_checks.is_approved(csr) and not csr_checks.is_denied_or_failed(csr)
    csr["status"]["conditions"].append({"type": "Failed", "status": "True"})
    assert not csr_checks.is_approved(csr) and csr_checks.is_denied_or_failed(csr)
