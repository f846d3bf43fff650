"""k8py.client.certs: CAs, serving and client certificates, CSRs, PEM, and a real TLS handshake."""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import os
import ssl
import stat

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from k8py.client import certs


def _san(cert: x509.Certificate) -> x509.SubjectAlternativeName:
    return cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value


def test_ca_is_a_self_signed_ca_certificate():
    ca = certs.new_self_signed_ca("k8py-ca")
    assert ca.cert.subject == ca.cert.issuer
    assert ca.cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    ca.cert.verify_directly_issued_by(ca.cert)


def test_serving_cert_carries_ip_and_dns_sans_and_server_auth():
    ca = certs.new_self_signed_ca("k8py-ca")
    cert, key = ca.issue_serving("kube-apiserver", dns_names=["localhost", "kubernetes.default.svc"],
                                 ips=["127.0.0.1", "10.96.0.1"])
    cert.verify_directly_issued_by(ca.cert)
    san = _san(cert)
    assert san.get_values_for_type(x509.DNSName) == ["localhost", "kubernetes.default.svc"]
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1"),
                                                        ipaddress.ip_address("10.96.0.1")]
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert cert.public_key().public_numbers() == key.public_key().public_numbers()


def test_client_cert_has_user_as_cn_and_groups_as_o():
    ca = certs.new_self_signed_ca("k8py-ca")
    cert, _ = ca.issue_client("system:node:n1", ["system:nodes", "extra"])
    assert certs.cert_subject(cert) == ("system:node:n1", ("system:nodes", "extra"))
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]


def test_csr_signed_by_the_ca_keeps_subject_and_sans():
    ca = certs.new_self_signed_ca("k8py-ca")
    key = certs.new_private_key()
    csr_pem = certs.new_csr(key, "system:node:n1", ["system:nodes"], dns_names=["n1"], ips=["127.0.0.5"])
    assert csr_pem.startswith(b"-----BEGIN CERTIFICATE REQUEST-----")
    cert = ca.sign_csr(csr_pem, usages=[certs.SERVER_AUTH])
    cert.verify_directly_issued_by(ca.cert)
    assert certs.cert_subject(cert) == ("system:node:n1", ("system:nodes",))
    assert _san(cert).get_values_for_type(x509.DNSName) == ["n1"]
    assert cert.public_key().public_numbers() == key.public_key().public_numbers()


def test_sign_csr_refuses_a_tampered_request():
    ca = certs.new_self_signed_ca("k8py-ca")
    good = certs.parse_csr_pem(certs.new_csr(certs.new_private_key(), "alice"))
    der = bytearray(good.public_bytes(certs.serialization.Encoding.DER))
    der[-1] ^= 1  # the last byte is inside the signature
    tampered = x509.load_der_x509_csr(bytes(der))
    with pytest.raises(ValueError, match="signature is invalid"):
        ca.sign_csr(tampered)


def test_leaf_never_outlives_the_ca_and_clock_is_injectable():
    base = dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc)
    ca = certs.new_self_signed_ca("short", validity=dt.timedelta(days=2), now=lambda: base)
    cert, _ = ca.issue_client("bob", validity=dt.timedelta(days=365))
    assert cert.not_valid_after_utc == ca.cert.not_valid_after_utc
    assert cert.not_valid_before_utc == base - dt.timedelta(minutes=5)


def test_pem_round_trip_and_file_modes(tmp_path):
    ca = certs.new_self_signed_ca("k8py-ca", key=certs.new_private_key("rsa"))
    ca.save(str(tmp_path / "ca.crt"), str(tmp_path / "ca.key"))
    assert stat.S_IMODE(os.stat(tmp_path / "ca.key").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(tmp_path / "ca.crt").st_mode) == 0o644
    again = certs.CertificateAuthority.load(str(tmp_path / "ca.crt"), str(tmp_path / "ca.key"))
    assert again.cert == ca.cert
    other = certs.new_self_signed_ca("other")
    certs.write_pem(str(tmp_path / "other.key"), certs.encode_private_key_pem(other.key), private=True)
    with pytest.raises(ValueError, match="not the key"):
        certs.CertificateAuthority.load(str(tmp_path / "ca.crt"), str(tmp_path / "other.key"))
    with pytest.raises(ValueError):
        certs.parse_certs_pem(b"not pem")


def test_self_signed_cert_key_bundles_leaf_and_ca():
    cert_pem, key_pem = certs.generate_self_signed_cert_key("127.0.0.1", alternate_dns=["localhost"])
    leaf, ca = certs.parse_certs_pem(cert_pem)
    leaf.verify_directly_issued_by(ca)
    assert _san(leaf).get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert _san(leaf).get_values_for_type(x509.DNSName) == ["localhost"]
    certs.parse_private_key_pem(key_pem)


async def test_real_tls_handshake_with_mutual_auth(tmp_path):
    """The certificates work with Python's ssl: server verified by hostname, client cert verified by CA."""
    ca = certs.new_self_signed_ca("k8py-ca")
    ca.save(str(tmp_path / "ca.crt"), str(tmp_path / "ca.key"))
    srv, srv_key = ca.issue_serving("server", dns_names=["localhost"], ips=["127.0.0.1"])
    cli, cli_key = ca.issue_client("alice", ["devs"])
    for name, c, k in (("srv", srv, srv_key), ("cli", cli, cli_key)):
        certs.write_pem(str(tmp_path / f"{name}.crt"), certs.encode_cert_pem(c))
        certs.write_pem(str(tmp_path / f"{name}.key"), certs.encode_private_key_pem(k), private=True)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(tmp_path / "ca.crt"))
    server_ctx.load_cert_chain(str(tmp_path / "srv.crt"), str(tmp_path / "srv.key"))
    server_ctx.verify_mode = ssl.CERT_REQUIRED
    seen: list[str] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("ssl_object").getpeercert()
        seen.append(dict(x[0] for x in peer["subject"])["commonName"])
        writer.write(b"ok")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=server_ctx)
    port = server.sockets[0].getsockname()[1]
    try:
        client_ctx = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
        client_ctx.load_cert_chain(str(tmp_path / "cli.crt"), str(tmp_path / "cli.key"))
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_ctx)
        assert await reader.read() == b"ok"
        writer.close()
        assert seen == ["alice"]
        # a client that does not trust our CA refuses the server
        with pytest.raises(ssl.SSLCertVerificationError):
            await asyncio.open_connection("127.0.0.1", port, ssl=ssl.create_default_context())
    finally:
        server.close()
        await server.wait_closed()
