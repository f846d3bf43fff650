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

Verifying a signature costs about a millisecond in Python, every request on
a keep-alive connection presents the same certificate, and a certificate's
verdict changes only with time: so the signature and usage checks of the
last :data:`CACHE_SIZE` certificates are remembered (by their DER bytes)
with their validity window, and only the window is checked again.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Sequence

from aiohttp import web
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.x509.oid import ExtendedKeyUsageOID

from k8py.api.errors import Unauthorized
from k8py.apiserver.authn.user import UserInfo
from k8py.client import certs

__all__ = ["X509Authenticator", "peer_certificate_der", "CACHE_SIZE"]

log = logging.getLogger(__name__)

#: certificates whose verdict is remembered (bounded: an LRU)
CACHE_SIZE = 1024


@dataclass(frozen=True, slots=True)
class _Verdict:
    user: UserInfo | None  # None: refused for ``problem`` whatever the time
    problem: str
    not_before: dt.datetime
    not_after: dt.datetime
    subject: str


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
        self._verdicts: OrderedDict[bytes, _Verdict] = OrderedDict()

    @classmethod
    def from_file(cls, client_ca_file: str, **kw: object) -> "X509Authenticator":
        return cls(certs.parse_certs_pem(certs.read_pem(client_ca_file)), **kw)  # type: ignore[arg-type]

    async def authenticate_request(self, request: web.Request) -> UserInfo | None:
        der = peer_certificate_der(request)
        if der is None:
            return None
        verdict = self._verdicts.get(der)
        if verdict is None:
            verdict = self._judge(x509.load_der_x509_certificate(der))
            self._verdicts[der] = verdict
            if len(self._verdicts) > CACHE_SIZE:
                self._verdicts.popitem(last=False)
        else:
            self._verdicts.move_to_end(der)
        return self._decide(verdict)

    def authenticate_certificate(self, cert: x509.Certificate) -> UserInfo:
        return self._decide(self._judge(cert))

    def _decide(self, verdict: _Verdict) -> UserInfo:
        now = self._now()
        problem = verdict.problem
        if not problem and now < verdict.not_before:
            problem = "x509: certificate is not yet valid"
        elif not problem and now > verdict.not_after:
            problem = "x509: certificate has expired"
        if problem or verdict.user is None:
            log.info("client certificate rejected", extra={"subject": verdict.subject, "reason": problem})
            raise Unauthorized("Unauthorized")
        return verdict.user

    def _judge(self, cert: x509.Certificate) -> _Verdict:
        """The time-independent checks, and the window the certificate (and its CA) is valid in."""
        problem, ca = self._verify(cert)
        not_before, not_after = cert.not_valid_before_utc, cert.not_valid_after_utc
        if ca is not None:
            not_before, not_after = max(not_before, ca.not_valid_before_utc), min(not_after, ca.not_valid_after_utc)
        name, groups = certs.cert_subject(cert)
        if not problem and not name:
            problem = "x509: the certificate has no common name (the user)"
        user = UserInfo(name, groups=groups) if not problem else None
        return _Verdict(user, problem, not_before, not_after, cert.subject.rfc4514_string())

    def _verify(self, cert: x509.Certificate) -> tuple[str, x509.Certificate | None]:
        """Why the certificate is not acceptable ("" when it is), and the CA that issued it."""
        try:
            usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
            if ExtendedKeyUsageOID.CLIENT_AUTH not in usages and ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE not in usages:
                return "x509: certificate specifies an incompatible key usage", None
        except x509.ExtensionNotFound:
            pass
        for ca in self._cas:
            if ca.subject != cert.issuer:
                continue
            try:
                cert.verify_directly_issued_by(ca)
            except (ValueError, TypeError, InvalidSignature):
                continue
            return "", ca
        return "x509: certificate signed by unknown authority", None
