"""The keys service-account tokens are signed and verified with.

Shared by the API server (``--service-account-signing-key-file`` signs bound
tokens, ``--service-account-key-file`` verifies) and the controller manager
(``--service-account-private-key-file`` signs legacy Secret tokens), as
upstream's ``pkg/serviceaccount`` is: so it lives in ``k8py.api``.

A key file is PEM: an RSA or EC (P-256/384/521) private key, a public key, or
several of either (a verifying file may hold many). The key id (``kid``) is
upstream's: the unpadded base64url SHA-256 of the public key's PKIX DER
encoding, so tokens signed by k8py and by kube-apiserver with the same key
carry the same ``kid``, and a JWKS served by one verifies the other's tokens.

Invariants: a :class:`SigningKey` always has a private key; a
:class:`VerifyingKey` never exposes one; :func:`jwks` publishes public parts
only.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import os
import re
from dataclasses import dataclass
from typing import Any, Iterable

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from joserfc.jwk import ECKey, RSAKey

__all__ = [
    "SigningKey", "VerifyingKey", "KeyFileError",
    "load_signing_key", "load_verifying_keys", "generate_signing_key", "ensure_signing_key_file",
    "key_id", "jwks",
]

_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z ]+)-----.+?-----END \1-----", re.S)

PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey
PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


class KeyFileError(ValueError):
    """A key file that is missing, unreadable or holds no usable key; says which and what to do."""


def key_id(public: PublicKey) -> str:
    der = public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.urlsafe_b64encode(hashlib.sha256(der).digest()).rstrip(b"=").decode()


def _algorithm(public: PublicKey) -> str:
    if isinstance(public, rsa.RSAPublicKey):
        return "RS256"
    size = public.curve.key_size
    return {256: "ES256", 384: "ES384", 521: "ES512"}.get(size, "ES256")


def _jose_key(key: PublicKey | PrivateKey) -> RSAKey | ECKey:
    if isinstance(key, (rsa.RSAPublicKey, rsa.RSAPrivateKey)):
        return RSAKey.import_key(key)
    return ECKey.import_key(key)


@dataclass(frozen=True)
class VerifyingKey:
    """A public key tokens are checked against, with its ``kid`` and algorithm."""

    kid: str
    algorithm: str
    public: PublicKey

    @functools.cached_property
    def jose(self) -> RSAKey | ECKey:
        """The key as joserfc takes it (imported once: importing costs more than verifying)."""
        return _jose_key(self.public)

    def to_jwk(self) -> dict[str, Any]:
        jwk = dict(self.jose.as_dict(private=False))
        jwk.update({"use": "sig", "kid": self.kid, "alg": self.algorithm})
        return jwk

    @classmethod
    def of(cls, public: PublicKey) -> "VerifyingKey":
        return cls(key_id(public), _algorithm(public), public)


@dataclass(frozen=True)
class SigningKey:
    """A private key that signs tokens (its public half verifies them)."""

    private: PrivateKey

    @functools.cached_property
    def verifying(self) -> VerifyingKey:
        return VerifyingKey.of(self.private.public_key())

    @property
    def kid(self) -> str:
        return self.verifying.kid

    @property
    def algorithm(self) -> str:
        return self.verifying.algorithm

    @functools.cached_property
    def jose(self) -> RSAKey | ECKey:
        return _jose_key(self.private)

    def pem(self) -> bytes:
        return self.private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def _read(path: str, flag: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as err:
        raise KeyFileError(f"{flag} {path}: cannot read it ({err.strerror or err}); give a PEM key file") from None


def _blocks(data: bytes) -> Iterable[tuple[str, bytes]]:
    for m in _PEM_BLOCK.finditer(data):
        yield m.group(1).decode(), m.group(0)


#: (path, inode, size, mtime) -> the key loaded from it: loading validates an RSA
#: key (about 0.1 s of CPU), and the API server's start reads its one file three
#: times (the flag check, the key made on a first start, the token issuer)
_LOADED: dict[tuple[str, int, int, int], SigningKey] = {}


def _file_identity(path: str) -> tuple[str, int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return os.path.realpath(path), st.st_ino, st.st_size, st.st_mtime_ns


def load_signing_key(path: str, *, flag: str = "--service-account-signing-key-file") -> SigningKey:
    """The first private key in ``path`` (RSA or EC), else :class:`KeyFileError`.
    A file loaded before and not changed since (same inode, size and mtime)
    gives the same key without parsing and validating it again."""
    identity = _file_identity(path)
    if identity is not None and identity in _LOADED:
        return _LOADED[identity]
    key = _load_signing_key(path, flag)
    if identity is not None:
        _LOADED[identity] = key
    return key


def _load_signing_key(path: str, flag: str) -> SigningKey:
    data = _read(path, flag)
    for label, block in _blocks(data):
        if "PRIVATE KEY" not in label:
            continue
        key = serialization.load_pem_private_key(block, password=None)
        if isinstance(key, (rsa.RSAPrivateKey, ec.EllipticCurvePrivateKey)):
            return SigningKey(key)
    raise KeyFileError(f"{flag} {path}: holds no RSA or EC private key in PEM "
                       "(make one with: openssl genrsa -out sa.key 2048)")


def load_verifying_keys(path: str, *, flag: str = "--service-account-key-file") -> list[VerifyingKey]:
    """Every public key in ``path``: public keys, private keys' public halves, certificates' keys."""
    from cryptography import x509

    data = _read(path, flag)
    out: list[VerifyingKey] = []
    for label, block in _blocks(data):
        public: Any = None
        if "PRIVATE KEY" in label:  # only its public half is used: validating the private part (slow for RSA) is moot
            public = serialization.load_pem_private_key(block, password=None, unsafe_skip_rsa_key_validation=True).public_key()
        elif label in ("PUBLIC KEY", "RSA PUBLIC KEY"):
            public = serialization.load_pem_public_key(block)
        elif label == "CERTIFICATE":
            public = x509.load_pem_x509_certificate(block).public_key()
        if isinstance(public, (rsa.RSAPublicKey, ec.EllipticCurvePublicKey)):
            out.append(VerifyingKey.of(public))
    if not out:
        raise KeyFileError(f"{flag} {path}: holds no RSA or EC key in PEM")
    return out


def generate_signing_key(*, ec_p256: bool = False) -> SigningKey:
    """A new RSA-2048 key (what key files hold), or a P-256 key (ES256): made in well
    under a millisecond where RSA takes tens, for a server's throwaway key."""
    if ec_p256:
        return SigningKey(ec.generate_private_key(ec.SECP256R1()))
    return SigningKey(rsa.generate_private_key(public_exponent=65537, key_size=2048))


def ensure_signing_key_file(path: str, *, ec_p256: bool = False) -> SigningKey:
    """Load ``path``, or create it (an RSA-2048 key, or with ``ec_p256`` a P-256
    one, mode 0600) when it does not exist yet.

    Safe when several processes start at once on one directory (``k8py up
    --apiservers N``): the key is written aside and hard-linked into place,
    which fails if another got there first, and then everyone loads the
    winner's key, so all of them sign and verify with the same one."""
    if not os.path.exists(path):
        key = generate_signing_key(ec_p256=ec_p256)
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        tmp = f"{path}.tmp{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(key.pem())
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, path)
                made = _file_identity(path)
                if made is not None:  # the key just made needs no validating when it is read back
                    _LOADED[made] = key
            except FileExistsError:
                pass
        finally:
            os.unlink(tmp)
    return load_signing_key(path)


def jwks(keys: Iterable[VerifyingKey]) -> dict[str, Any]:
    """A JSON Web Key Set of ``keys`` (each ``kid`` once), as ``/openid/v1/jwks`` serves it."""
    seen: dict[str, dict[str, Any]] = {}
    for k in keys:
        seen.setdefault(k.kid, k.to_jwk())
    return {"keys": list(seen.values())}

