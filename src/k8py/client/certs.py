"""Keys, certificates and CSRs: client-go's ``util/cert`` and ``util/keyutil``.

What a cluster needs to secure itself, on top of ``cryptography``:

- :func:`new_private_key` an ECDSA P-256 key (what client-go's
  ``GenerateSelfSignedCertKey`` and the kubelet's CSRs use);
- :func:`new_self_signed_ca` a CA certificate (``CA:TRUE``, keyCertSign), and
  :class:`CertificateAuthority` pairing it with its key to issue
  certificates: :meth:`~CertificateAuthority.issue_serving` (SANs: IPs and
  DNS names, serverAuth) and :meth:`~CertificateAuthority.issue_client`
  (CN = user, O = groups, clientAuth), both from one :class:`CertConfig`;
- :func:`generate_self_signed_cert_key` what kube-apiserver does without
  ``--tls-cert-file``: a throwaway CA and a serving certificate signed by it,
  for a host and its alternate IPs and names;
- :func:`new_csr` / :meth:`CertificateAuthority.sign_csr` the request and the
  signing of a ``CertificateSigningRequest``'s PEM with chosen usages;
- PEM in and out: ``encode_*`` / ``parse_*``, and :func:`write_pem` which
  writes atomically with mode 0600 for keys (0644 for certificates).

Invariants: every certificate carries a random 128-bit serial, a
SubjectKeyIdentifier, an AuthorityKeyIdentifier of its issuer, and a
``not_before`` backdated by five minutes (client-go's clock-skew allowance).
Time comes from an injectable ``now`` so tests can make expired and
not-yet-valid certificates. Nothing here does I/O except :func:`write_pem`,
:func:`read_pem` and :meth:`CertificateAuthority.load`/``save``.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import secrets
import tempfile
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = [
    "PrivateKey", "CertConfig", "CertificateAuthority",
    "SERVER_AUTH", "CLIENT_AUTH", "DEFAULT_CERT_VALIDITY", "DEFAULT_CA_VALIDITY",
    "new_private_key", "new_self_signed_ca", "generate_self_signed_cert_key", "new_csr",
    "encode_cert_pem", "encode_certs_pem", "parse_cert_pem", "parse_certs_pem",
    "encode_private_key_pem", "parse_private_key_pem", "encode_csr_pem", "parse_csr_pem",
    "write_pem", "read_pem", "cert_subject", "utcnow",
]

PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey

SERVER_AUTH = ExtendedKeyUsageOID.SERVER_AUTH
CLIENT_AUTH = ExtendedKeyUsageOID.CLIENT_AUTH

#: kubeadm's leaf lifetime (one year) and CA lifetime (ten years)
DEFAULT_CERT_VALIDITY = dt.timedelta(days=365)
DEFAULT_CA_VALIDITY = dt.timedelta(days=3650)
_BACKDATE = dt.timedelta(minutes=5)


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


Clock = Callable[[], dt.datetime]


@dataclass(frozen=True)
class CertConfig:
    """What to put in a certificate (client-go's ``cert.Config``).

    ``common_name`` is the user of a client certificate, ``organization`` its
    groups; ``dns_names`` and ``ips`` are the SANs of a serving certificate.
    ``usages`` are extended key usages (:data:`SERVER_AUTH`, :data:`CLIENT_AUTH`).
    """

    common_name: str
    organization: Sequence[str] = ()
    dns_names: Sequence[str] = ()
    ips: Sequence[str] = ()
    usages: Sequence[x509.ObjectIdentifier] = ()
    validity: dt.timedelta = DEFAULT_CERT_VALIDITY

    def subject(self) -> x509.Name:
        attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in self.organization]
        if self.common_name:
            attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, self.common_name))
        return x509.Name(attrs)

    def san(self) -> x509.SubjectAlternativeName | None:
        names: list[x509.GeneralName] = [x509.DNSName(d) for d in self.dns_names]
        names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in self.ips]
        return x509.SubjectAlternativeName(names) if names else None


def new_private_key(kind: str = "ecdsa") -> PrivateKey:
    """A new key: ``ecdsa`` (P-256, the default) or ``rsa`` (2048 bits)."""
    if kind == "ecdsa":
        return ec.generate_private_key(ec.SECP256R1())
    if kind == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    raise ValueError(f"unknown key kind {kind!r}: use 'ecdsa' or 'rsa'")


def _serial() -> int:
    return secrets.randbits(127) | 1  # positive, non-zero, fits RFC 5280's 20 octets


def _builder(subject: x509.Name, issuer: x509.Name, public_key: object, now: dt.datetime,
             validity: dt.timedelta) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)  # type: ignore[arg-type]
        .serial_number(_serial())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + validity)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)  # type: ignore[arg-type]
    )


def new_self_signed_ca(common_name: str, key: PrivateKey | None = None, *,
                       validity: dt.timedelta = DEFAULT_CA_VALIDITY,
                       now: Clock = utcnow) -> "CertificateAuthority":
    """A new self-signed CA (client-go's ``NewSelfSignedCACert``)."""
    key = key or new_private_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        _builder(name, name, key.public_key(), now(), validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=True,
            data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=False,
            encipher_only=False, decipher_only=False), critical=True)
        .sign(key, hashes.SHA256())
    )
    return CertificateAuthority(cert, key, now=now)


@dataclass
class CertificateAuthority:
    """A CA certificate and its key, able to issue and sign."""

    cert: x509.Certificate
    key: PrivateKey
    now: Clock = field(default=utcnow, repr=False)

    # -- issuing ------------------------------------------------------------

    def issue(self, config: CertConfig, key: PrivateKey | None = None) -> tuple[x509.Certificate, PrivateKey]:
        """A certificate for ``config`` signed by this CA, with a new key unless one is given."""
        key = key or new_private_key()
        cert = self._sign(config.subject(), key.public_key(), config.san(), config.usages, config.validity)
        return cert, key

    def issue_serving(self, common_name: str, *, dns_names: Sequence[str] = (), ips: Sequence[str] = (),
                      validity: dt.timedelta = DEFAULT_CERT_VALIDITY) -> tuple[x509.Certificate, PrivateKey]:
        return self.issue(CertConfig(common_name, dns_names=dns_names, ips=ips,
                                     usages=(SERVER_AUTH,), validity=validity))

    def issue_client(self, user: str, groups: Sequence[str] = (), *,
                     validity: dt.timedelta = DEFAULT_CERT_VALIDITY) -> tuple[x509.Certificate, PrivateKey]:
        return self.issue(CertConfig(user, organization=groups, usages=(CLIENT_AUTH,), validity=validity))

    def sign_csr(self, csr: x509.CertificateSigningRequest | bytes, *,
                 usages: Sequence[x509.ObjectIdentifier] = (CLIENT_AUTH,),
                 validity: dt.timedelta = DEFAULT_CERT_VALIDITY) -> x509.Certificate:
        """Sign a CSR (PEM or parsed) with its subject and SANs and the given usages.

        Raises :class:`ValueError` when the CSR's self-signature does not verify.
        """
        if isinstance(csr, bytes):
            csr = parse_csr_pem(csr)
        if not csr.is_signature_valid:
            raise ValueError("the certificate signing request's signature is invalid")
        try:
            san = csr.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        except x509.ExtensionNotFound:
            san = None
        return self._sign(csr.subject, csr.public_key(), san, usages, validity)

    def _sign(self, subject: x509.Name, public_key: object, san: x509.SubjectAlternativeName | None,
              usages: Iterable[x509.ObjectIdentifier], validity: dt.timedelta) -> x509.Certificate:
        now = self.now()
        not_after = min(now + validity, self.cert.not_valid_after_utc)  # never outlive the CA
        builder = (
            _builder(subject, self.cert.subject, public_key, now, not_after - now)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, content_commitment=False,
                key_encipherment=isinstance(public_key, rsa.RSAPublicKey),
                data_encipherment=False, key_agreement=False, key_cert_sign=False, crl_sign=False,
                encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                self.key.public_key()), critical=False)  # type: ignore[arg-type]
        )
        usages = list(usages)
        if usages:
            builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        if san is not None:
            builder = builder.add_extension(san, critical=False)
        return builder.sign(self.key, hashes.SHA256())

    # -- files --------------------------------------------------------------

    @property
    def cert_pem(self) -> bytes:
        return encode_cert_pem(self.cert)

    def save(self, cert_path: str, key_path: str) -> None:
        write_pem(key_path, encode_private_key_pem(self.key), private=True)
        write_pem(cert_path, self.cert_pem)

    @classmethod
    def load(cls, cert_path: str, key_path: str, *, now: Clock = utcnow) -> "CertificateAuthority":
        cert = parse_cert_pem(read_pem(cert_path))
        key = parse_private_key_pem(read_pem(key_path))
        if cert.public_key().public_numbers() != key.public_key().public_numbers():
            raise ValueError(f"{key_path} is not the key of the certificate {cert_path}")
        return cls(cert, key, now=now)


def generate_self_signed_cert_key(host: str, alternate_ips: Sequence[str] = (),
                                  alternate_dns: Sequence[str] = (), *,
                                  now: Clock = utcnow) -> tuple[bytes, bytes]:
    """A serving certificate for ``host`` (an IP or a name) and its key, as PEM.

    As client-go's ``GenerateSelfSignedCertKey``: a CA named ``<host>-ca@<unix
    time>`` signs a certificate named ``<host>@<unix time>``; the returned
    certificate PEM holds the leaf then the CA, so a client can pin either.
    """
    stamp = int(now().timestamp())
    ca = new_self_signed_ca(f"{host}-ca@{stamp}", now=now)
    ips, dns = list(alternate_ips), list(alternate_dns)
    try:
        ipaddress.ip_address(host)
        ips.insert(0, host)
    except ValueError:
        dns.insert(0, host)
    cert, key = ca.issue_serving(f"{host}@{stamp}", dns_names=dns, ips=ips)
    return encode_certs_pem([cert, ca.cert]), encode_private_key_pem(key)


def new_csr(key: PrivateKey, common_name: str, organization: Sequence[str] = (), *,
            dns_names: Sequence[str] = (), ips: Sequence[str] = ()) -> bytes:
    """A PEM certificate signing request (client-go's ``MakeCSR``)."""
    config = CertConfig(common_name, organization=organization, dns_names=dns_names, ips=ips)
    builder = x509.CertificateSigningRequestBuilder().subject_name(config.subject())
    san = config.san()
    if san is not None:
        builder = builder.add_extension(san, critical=False)
    return encode_csr_pem(builder.sign(key, hashes.SHA256()))


def cert_subject(cert: x509.Certificate | x509.CertificateSigningRequest) -> tuple[str, tuple[str, ...]]:
    """The (CN, Os) of a certificate: the user and groups of an x509 client."""
    cn = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    orgs = tuple(str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME))
    return (str(cn[0]) if cn else ""), orgs


# -- PEM ----------------------------------------------------------------------

def encode_cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def encode_certs_pem(certs: Iterable[x509.Certificate]) -> bytes:
    return b"".join(encode_cert_pem(c) for c in certs)


def parse_certs_pem(data: bytes) -> list[x509.Certificate]:
    """Every certificate in a PEM bundle; :class:`ValueError` when there is none."""
    certs = x509.load_pem_x509_certificates(data)
    if not certs:
        raise ValueError("data does not contain any valid RSA or ECDSA certificates")
    return certs


def parse_cert_pem(data: bytes) -> x509.Certificate:
    """The first certificate of a PEM bundle."""
    return parse_certs_pem(data)[0]


def encode_private_key_pem(key: PrivateKey) -> bytes:
    """``EC PRIVATE KEY`` / ``RSA PRIVATE KEY`` (traditional OpenSSL), as keyutil writes."""
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption())


def parse_private_key_pem(data: bytes) -> PrivateKey:
    key = serialization.load_pem_private_key(data, password=None)
    if not isinstance(key, (ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey)):
        raise ValueError("data does not contain a valid RSA or ECDSA private key")
    return key


def encode_csr_pem(csr: x509.CertificateSigningRequest) -> bytes:
    return csr.public_bytes(serialization.Encoding.PEM)


def parse_csr_pem(data: bytes) -> x509.CertificateSigningRequest:
    return x509.load_pem_x509_csr(data)


def write_pem(path: str, data: bytes, *, private: bool = False) -> None:
    """Write atomically (temp file + rename); mode 0600 for a key, 0644 otherwise."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    try:
        os.fchmod(fd, 0o600 if private else 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_pem(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()
