"""X509Authenticator's verdict cache: a remembered certificate still expires on time.

The request is a small stand-in exposing only the TLS peer certificate (the
part of aiohttp's request the authenticator reads); the HTTPS tests beside
this one cover the real path.
"""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import pytest

from k8py.api.errors import Unauthorized
from k8py.apiserver.authn import x509 as x509_authn
from k8py.client import certs


def _request(der: bytes) -> SimpleNamespace:
    ssl_object = SimpleNamespace(getpeercert=lambda binary_form=False: der)
    return SimpleNamespace(transport=SimpleNamespace(get_extra_info=lambda name: ssl_object if name == "ssl_object" else None))


async def test_a_cached_certificate_is_refused_once_it_expires():
    now = [dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)]
    ca = certs.new_self_signed_ca("ca", now=lambda: now[0])
    cert, _ = ca.issue_client("alice", ["devs"], validity=dt.timedelta(hours=1))
    der = cert.public_bytes(certs.serialization.Encoding.DER)
    authenticator = x509_authn.X509Authenticator([ca.cert], now=lambda: now[0])
    user = await authenticator.authenticate_request(_request(der))  # type: ignore[arg-type]
    assert (user.name, user.groups) == ("alice", ("devs",))
    assert await authenticator.authenticate_request(_request(der)) == user  # type: ignore[arg-type]
    now[0] += dt.timedelta(hours=2)
    with pytest.raises(Unauthorized):
        await authenticator.authenticate_request(_request(der))  # type: ignore[arg-type]


async def test_the_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(x509_authn, "CACHE_SIZE", 3)
    ca = certs.new_self_signed_ca("ca")
    authenticator = x509_authn.X509Authenticator([ca.cert])
    for i in range(5):
        cert, _ = ca.issue_client(f"u{i}")
        await authenticator.authenticate_request(_request(cert.public_bytes(certs.serialization.Encoding.DER)))  # type: ignore[arg-type]
    assert len(authenticator._verdicts) == 3


async def test_an_untrusted_certificate_stays_refused_from_the_cache():
    stranger = certs.new_self_signed_ca("stranger")
    cert, _ = stranger.issue_client("mallory", ["system:masters"])
    der = cert.public_bytes(certs.serialization.Encoding.DER)
    authenticator = x509_authn.X509Authenticator([certs.new_self_signed_ca("ca").cert])
    for _ in range(2):
        with pytest.raises(Unauthorized):
            await authenticator.authenticate_request(_request(der))  # type: ignore[arg-type]
