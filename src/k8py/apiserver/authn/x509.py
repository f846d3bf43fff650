"""The x509 client-certificate authenticator (upstream ``authenticator/request/x509``).

A request over TLS that presented a client certificate is the user named by
the certificate's CN, in the groups named by its O attributes, provided the
certificate verifies against ``--client-ca-file``: issued (signed) by one of
those CAs, inside its validity window at the injectable ``now``, and allowed
for client authentication (ExtendedKeyUsage clientAuth or no EKU at all).

The TLS layer accepts any client certificate (see
:mod:`k8py.apiserver.secure_serving`), so the check is here, as upstream's:
a certificate that does not verify is this authenticator's credential and
invalid, so it raises :class:`~k8py.api.errors.Unauthorized` (the chain then
answers 401). No certificate: ``None``, the next authenticator is asked.
Only the leaf is seen (Python's :mod:`ssl` does not hand out the peer's
chain), so client certificates must be issued directly by a listed CA.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Callable, Sequence

from aiohttp import web
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.x509.oid import ExtendedKeyUsageOID

from k8py.api.errors import Unauthorized
from k8py.apiserver.authn.user import UserInfo
from k8py.client import certs

__all__ = ["X509Authenticator", "peer_certificate_der"]

log = logging.getLogger(__name__)


def peer_certificate_der(request: web.Request) -> bytes | None:
    """The DER of the client certificate of the request's TLS connection, if any."""
    transport = request.transport
    if transport is None:
        return None
    ssl_object = transport.get_extra_info("ssl_object")
    if ssl_object is None:
        return None
    return ssl_object.getpeercert(binary_form=True) or None


class X509Authenticator:
    """CN = user, O = groups, for certificates that verify against the client CAs."""

    def __init__(self, cas: Sequence[x509.Certificate], *, now: Callable[[], dt.datetime] = certs.utcnow) -> None:
        self._cas = list(cas)
        self._now = now

    @classmethod
    def from_file(cls, client_ca_file: str, **kw: object) -> "X509Authenticator":
        return cls(certs.parse_certs_pem(certs.read_pem(client_ca_file)), **kw)  # type: ignore[arg-type]

    async def authenticate_request(self, request: web.Request) -> UserInfo | None:
        der = peer_certificate_der(request)
        if der is None:
            return None
        return self.authenticate_certificate(x509.load_der_x509_certificate(der))

    def authenticate_certificate(self, cert: x509.Certificate) -> UserInfo:
        problem = self._verify(cert)
        if problem:
            log.info("client certificate rejected", extra={"subject": cert.subject.rfc4514_string(), "reason": problem})
            raise Unauthorized("Unauthorized")
        user, groups = certs.cert_subject(cert)
        if not user:
            raise Unauthorized("Unauthorized")
        return UserInfo(user, groups=groups)

    def _verify(self, cert: x509.Certificate) -> str:
        """Why the certificate is not acceptable ("" when it is)."""
        now = self._now()
        if now < cert.not_valid_before_utc:
            return "x509: certificate is not yet valid"
        if now > cert.not_valid_after_utc:
            return "x509: certificate has expired"
        try:
            usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
            if ExtendedKeyUsageOID.CLIENT_AUTH not in usages and ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE not in usages:
                return "x509: certificate specifies an incompatible key usage"
        except x509.ExtensionNotFound:
            pass
        for ca in self._cas:
            if ca.subject != cert.issuer:
                continue
            try:
                cert.verify_directly_issued_by(ca)
            except (ValueError, TypeError, InvalidSignature):
                continue
            if not ca.not_valid_before_utc <= now <= ca.not_valid_after_utc:
                return "x509: the issuing CA has expired"
            return ""
        return "x509: certificate signed by unknown authority"
