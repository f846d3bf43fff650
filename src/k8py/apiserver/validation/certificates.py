"""certificates.k8s.io/v1 CertificateSigningRequest validation, with upstream's messages.

- ``spec.request``: a PEM ``CERTIFICATE REQUEST`` (base64 in JSON) whose
  signature verifies; ``spec.signerName``: a qualified name (``domain/path``);
  ``spec.usages``: required, from the known key usages; ``expirationSeconds``
  at least 600; the spec is immutable;
- ``status.conditions``: types Approved, Denied, Failed (or any other with a
  status of True/False/Unknown), Approved and Denied never together, each
  type once; ``status.certificate``: PEM CERTIFICATE blocks only, and set once.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from cryptography import x509

from k8py.api.errors import Cause

__all__ = ["VALIDATORS", "KNOWN_USAGES", "decoded_request"]

Object = dict[str, Any]

KNOWN_USAGES = frozenset({
    "signing", "digital signature", "content commitment", "key encipherment", "key agreement",
    "data encipherment", "cert sign", "crl sign", "encipher only", "decipher only", "any",
    "server auth", "client auth", "code signing", "email protection", "s/mime", "ipsec end system",
    "ipsec tunnel", "ipsec user", "timestamping", "ocsp signing", "microsoft sgc", "netscape sgc",
})

_SIGNER = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+/[A-Za-z0-9._~%!$&'()*+,;=:@/-]+$")


def decoded_request(spec: Object) -> bytes:
    value = spec.get("request") or ""
    try:
        return base64.b64decode(value, validate=True) if isinstance(value, str) else b""
    except (binascii.Error, ValueError):
        return b""


def _request_causes(spec: Object) -> list[Cause]:
    raw = decoded_request(spec)
    if not raw:
        return [Cause("FieldValueRequired", "Required value", "spec.request")]
    try:
        csr = x509.load_pem_x509_csr(raw)
    except ValueError:
        return [Cause("FieldValueInvalid", "Invalid value: []byte{...}: PEM block type must be CERTIFICATE REQUEST", "spec.request")]
    if not csr.is_signature_valid:
        return [Cause("FieldValueInvalid", "Invalid value: []byte{...}: the certificate request's signature does not verify", "spec.request")]
    return []


def _conditions(status: Object) -> list[Cause]:
    causes: list[Cause] = []
    seen: set[str] = set()
    for i, cond in enumerate(status.get("conditions") or ()):
        path = f"status.conditions[{i}]"
        if not isinstance(cond, dict):
            causes.append(Cause("FieldValueInvalid", "Invalid value: must be an object", path))
            continue
        ctype = cond.get("type") or ""
        if not ctype:
            causes.append(Cause("FieldValueRequired", "Required value", f"{path}.type"))
        if ctype in seen and ctype in ("Approved", "Denied", "Failed"):
            causes.append(Cause("FieldValueDuplicate", f'Duplicate value: "{ctype}"', f"{path}.type"))
        seen.add(ctype)
        st = cond.get("status") or ""
        if ctype in ("Approved", "Denied") and st != "True":
            causes.append(Cause("FieldValueNotSupported", f'Unsupported value: "{st}": supported values: "True"', f"{path}.status"))
        elif st not in ("True", "False", "Unknown"):
            causes.append(Cause("FieldValueNotSupported", f'Unsupported value: "{st}": supported values: "False", "True", "Unknown"', f"{path}.status"))
    if "Approved" in seen and "Denied" in seen:
        causes.append(Cause("FieldValueInvalid", "Invalid value: \"Approved\": Approved and Denied conditions are mutually exclusive", "status.conditions"))
    return causes


def _certificate(status: Object, old_status: Object | None) -> list[Cause]:
    cert = status.get("certificate") or ""
    old_cert = (old_status or {}).get("certificate") or ""
    if old_cert and cert != old_cert:
        return [Cause("FieldValueForbidden", "Forbidden: updates may not modify existing certificate content", "status.certificate")]
    if not cert:
        return []
    try:
        raw = base64.b64decode(cert, validate=True)
        certs = x509.load_pem_x509_certificates(raw)
    except (binascii.Error, ValueError):
        return [Cause("FieldValueInvalid", "Invalid value: \"<certificate data>\": must contain at least one CERTIFICATE PEM block", "status.certificate")]
    return [] if certs else [Cause("FieldValueInvalid", "Invalid value: must contain at least one CERTIFICATE PEM block", "status.certificate")]


def validate_csr(obj: Object, old: Object | None) -> list[Cause]:
    spec = obj.get("spec") or {}
    causes: list[Cause] = []
    if old is not None:
        if spec != (old.get("spec") or {}):
            causes.append(Cause("FieldValueInvalid", "Invalid value: field is immutable", "spec"))
    else:
        causes += _request_causes(spec)
        signer = spec.get("signerName") or ""
        if not signer:
            causes.append(Cause("FieldValueRequired", "Required value", "spec.signerName"))
        elif not _SIGNER.match(signer):
            causes.append(Cause("FieldValueInvalid", f'Invalid value: "{signer}": must be a fully qualified domain and path of the form \'example.com/signer-name\'', "spec.signerName"))
        usages = spec.get("usages")
        if not usages:
            causes.append(Cause("FieldValueRequired", "Required value", "spec.usages"))
        for i, usage in enumerate(usages or ()):
            if usage not in KNOWN_USAGES:
                causes.append(Cause("FieldValueNotSupported", f'Unsupported value: "{usage}"', f"spec.usages[{i}]"))
        seconds = spec.get("expirationSeconds")
        if seconds is not None and (not isinstance(seconds, int) or seconds < 600):
            causes.append(Cause("FieldValueInvalid", f"Invalid value: {seconds}: may not specify a duration less than 600 seconds (10 minutes)", "spec.expirationSeconds"))
    status = obj.get("status") or {}
    causes += _conditions(status)
    causes += _certificate(status, (old or {}).get("status"))
    return causes


VALIDATORS = {"CertificateSigningRequest": validate_csr}
