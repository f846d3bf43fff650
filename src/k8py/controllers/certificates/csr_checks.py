"""What a CertificateSigningRequest for each built-in signer may ask for (upstream
``pkg/apis/certificates/helpers.go`` and the signer's ``validators``).

Pure functions over the CSR object and its parsed x509 request: each check
returns ``""`` when fine, else the message a ``Failed`` condition carries.
"""

from __future__ import annotations

import base64
from typing import Any

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = [
    "CLIENT", "CLIENT_KUBELET", "KUBELET_SERVING", "SIGNERS",
    "parse_request", "condition", "is_approved", "is_denied_or_failed",
    "check_for_signer", "is_node_client", "extended_usages", "subject",
]

CLIENT = "kubernetes.io/kube-apiserver-client"
CLIENT_KUBELET = "kubernetes.io/kube-apiserver-client-kubelet"
KUBELET_SERVING = "kubernetes.io/kubelet-serving"
SIGNERS = (CLIENT, CLIENT_KUBELET, KUBELET_SERVING)

_EXTENDED = {
    "client auth": ExtendedKeyUsageOID.CLIENT_AUTH,
    "server auth": ExtendedKeyUsageOID.SERVER_AUTH,
    "code signing": ExtendedKeyUsageOID.CODE_SIGNING,
    "email protection": ExtendedKeyUsageOID.EMAIL_PROTECTION,
    "timestamping": ExtendedKeyUsageOID.TIME_STAMPING,
    "ocsp signing": ExtendedKeyUsageOID.OCSP_SIGNING,
}
_KEY_USAGES = {"digital signature", "key encipherment"}

Object = dict[str, Any]


def parse_request(csr: Object) -> x509.CertificateSigningRequest:
    raw = base64.b64decode((csr.get("spec") or {}).get("request") or "")
    return x509.load_pem_x509_csr(raw)


def condition(csr: Object, ctype: str) -> Object | None:
    for c in (csr.get("status") or {}).get("conditions") or ():
        if c.get("type") == ctype and c.get("status") == "True":
            return c
    return None


def is_approved(csr: Object) -> bool:
    return condition(csr, "Approved") is not None and not is_denied_or_failed(csr)


def is_denied_or_failed(csr: Object) -> bool:
    return condition(csr, "Denied") is not None or condition(csr, "Failed") is not None


def subject(request: x509.CertificateSigningRequest) -> tuple[str, list[str]]:
    cn = [str(a.value) for a in request.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    orgs = [str(a.value) for a in request.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    return (cn[0] if cn else ""), orgs


def _sans(request: x509.CertificateSigningRequest) -> x509.SubjectAlternativeName | None:
    try:
        return request.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return None


def extended_usages(usages: list[str]) -> list[x509.ObjectIdentifier]:
    return [_EXTENDED[u] for u in usages if u in _EXTENDED]


def _usages_within(usages: list[str], allowed: set[str], required: str) -> str:
    bad = [u for u in usages if u not in allowed]
    if bad:
        return f"invalid usage for {'client' if required == 'client auth' else 'serving'} certificate: {bad[0]}"
    if required not in usages:
        return f"missing required usage for {'client' if required == 'client auth' else 'serving'} certificate: {required}"
    return ""


def _node_subject(cn: str, orgs: list[str]) -> str:
    if orgs != ["system:nodes"]:
        return 'subject organization is not system:nodes'
    if not cn.startswith("system:node:") or cn == "system:node:":
        return 'subject common name does not begin with "system:node:"'
    return ""


def is_node_client(csr: Object, request: x509.CertificateSigningRequest) -> bool:
    """A kubelet's client certificate request: ``system:node:<name>`` in system:nodes, client usages, no SANs."""
    cn, orgs = subject(request)
    usages = list((csr.get("spec") or {}).get("usages") or ())
    return not _node_subject(cn, orgs) and _sans(request) is None and not _usages_within(
        usages, _KEY_USAGES | {"client auth"}, "client auth")


def check_for_signer(csr: Object, request: x509.CertificateSigningRequest) -> str:
    """Why ``csr`` may not be signed by its signer ("" = it may)."""
    spec = csr.get("spec") or {}
    signer = spec.get("signerName")
    usages = list(spec.get("usages") or ())
    cn, orgs = subject(request)
    if signer == CLIENT:
        return _usages_within(usages, _KEY_USAGES | {"client auth"}, "client auth")
    if signer == CLIENT_KUBELET:
        problem = _node_subject(cn, orgs)
        if problem:
            return problem
        if _sans(request) is not None:
            return "subject alternative names are not allowed for kubelet client certificates"
        return _usages_within(usages, _KEY_USAGES | {"client auth"}, "client auth")
    if signer == KUBELET_SERVING:
        problem = _node_subject(cn, orgs)
        if problem:
            return problem
        sans = _sans(request)
        names = [] if sans is None else list(sans)
        if not names:
            return "DNS or IP subjectAltName is required"
        if any(not isinstance(n, (x509.DNSName, x509.IPAddress)) for n in names):
            return "email and URI subjectAltNames are not allowed"
        return _usages_within(usages, _KEY_USAGES | {"server auth"}, "server auth")
    return f"unknown signer {signer!r}"
