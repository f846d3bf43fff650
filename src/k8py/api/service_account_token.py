"""Service-account JWTs: their claims, signing, and the signature check.

Two shapes, as upstream's ``pkg/serviceaccount`` writes them:

- **bound** (TokenRequest, projected volumes): ``iss`` (the API server's
  ``--service-account-issuer``), ``sub`` ``system:serviceaccount:NS:NAME``,
  ``aud``, ``exp``, ``iat``, ``nbf``, ``jti`` and a private ``kubernetes.io``
  claim naming the namespace, the service account, and the object the token is
  bound to (a pod, with its node, or a secret, or a node) by name and uid,
  plus ``warnafter`` when the expiry was extended;
- **legacy** (the token controller's ``kubernetes.io/service-account-token``
  Secrets): issuer ``kubernetes/serviceaccount``, no expiry, flat
  ``kubernetes.io/serviceaccount/*`` claims.

Here only what needs no cluster state: build the claims, sign them, check a
signature and read the claims back. Whether the named objects still exist is
the API server's authenticator's job (``k8py.apiserver.authn.service_account``).
Shared by the API server and the controller manager, hence in ``k8py.api``.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import orjson
from joserfc import jws
from joserfc.errors import JoseError

from k8py.api.service_account_keys import SigningKey, VerifyingKey

__all__ = [
    "LEGACY_ISSUER", "SERVICE_ACCOUNT_PREFIX", "Ref", "TokenInvalid",
    "bound_claims", "legacy_claims", "sign", "unverified_claims", "verify_signature",
    "username", "split_username",
]

LEGACY_ISSUER = "kubernetes/serviceaccount"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"

ALGORITHMS = ["RS256", "RS384", "RS512", "ES256", "ES384", "ES512"]


@dataclass(frozen=True, slots=True)
class Ref:
    """An object a token names: by name and uid."""

    name: str
    uid: str = ""

    def to_claim(self) -> dict[str, str]:
        return {"name": self.name, "uid": self.uid}

    @classmethod
    def from_claim(cls, value: Any) -> "Ref | None":
        if not isinstance(value, Mapping) or not value.get("name"):
            return None
        return cls(str(value["name"]), str(value.get("uid") or ""))


class TokenInvalid(Exception):
    """A token that is a JWT but does not verify (bad signature, unknown key)."""


def username(namespace: str, name: str) -> str:
    return f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"


def split_username(user: str) -> tuple[str, str] | None:
    """``system:serviceaccount:NS:NAME`` -> (NS, NAME), else None."""
    if not user.startswith(SERVICE_ACCOUNT_PREFIX):
        return None
    namespace, sep, name = user[len(SERVICE_ACCOUNT_PREFIX):].partition(":")
    if not sep or not namespace or not name or ":" in name:
        return None
    return namespace, name


def bound_claims(
    *,
    issuer: str,
    audiences: Iterable[str],
    namespace: str,
    service_account: Ref,
    issued_at: int,
    expires_at: int,
    pod: Ref | None = None,
    secret: Ref | None = None,
    node: Ref | None = None,
    warn_after: int | None = None,
    jti: str | None = None,
) -> dict[str, Any]:
    """The claims of a bound token (upstream ``serviceaccount.Claims``)."""
    private: dict[str, Any] = {"namespace": namespace, "serviceaccount": service_account.to_claim()}
    if pod is not None:
        private["pod"] = pod.to_claim()
    if secret is not None:
        private["secret"] = secret.to_claim()
    if node is not None:
        private["node"] = node.to_claim()
    if warn_after is not None:
        private["warnafter"] = warn_after
    return {
        "aud": list(audiences),
        "exp": expires_at,
        "iat": issued_at,
        "iss": issuer,
        "jti": jti or str(uuid.uuid4()),
        "kubernetes.io": private,
        "nbf": issued_at,
        "sub": username(namespace, service_account.name),
    }


def legacy_claims(*, namespace: str, service_account: Ref, secret_name: str) -> dict[str, Any]:
    """The claims of a legacy Secret-based token (upstream ``LegacyClaims``): no expiry."""
    return {
        "iss": LEGACY_ISSUER,
        "kubernetes.io/serviceaccount/namespace": namespace,
        "kubernetes.io/serviceaccount/secret.name": secret_name,
        "kubernetes.io/serviceaccount/service-account.name": service_account.name,
        "kubernetes.io/serviceaccount/service-account.uid": service_account.uid,
        "sub": username(namespace, service_account.name),
    }


def sign(claims: Mapping[str, Any], key: SigningKey) -> str:
    """A compact JWS of ``claims``; the header is ``{"alg", "kid"}`` as upstream's."""
    header = {"alg": key.algorithm, "kid": key.kid}
    payload = orjson.dumps(dict(claims))
    return jws.serialize_compact(header, payload, key.jose, algorithms=[key.algorithm])


def _b64json(part: str) -> Any:
    try:
        return orjson.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (binascii.Error, ValueError, orjson.JSONDecodeError):
        return None


def unverified_claims(token: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(header, claims) of a compact JWS without checking it, or None if ``token`` is no JWT.

    Used to decide whether a token is ours at all (its issuer) before the
    signature is checked, as upstream's authenticator peeks at ``iss``."""
    parts = token.split(".")
    if len(parts) != 3 or not all(parts[:2]):
        return None
    header, claims = _b64json(parts[0]), _b64json(parts[1])
    if not isinstance(header, dict) or not isinstance(claims, dict) or "alg" not in header:
        return None
    return header, claims


def verify_signature(token: str, keys: Iterable[VerifyingKey]) -> dict[str, Any]:
    """The claims of ``token`` if one of ``keys`` signed it, else :class:`TokenInvalid`.

    The key named by the header's ``kid`` is tried first, then every other
    (upstream tries them all: a key file may lack ids)."""
    parsed = unverified_claims(token)
    if parsed is None:
        raise TokenInvalid("not a compact JWS")
    header, _ = parsed
    kid = header.get("kid")
    candidates = sorted(keys, key=lambda k: k.kid != kid)
    for key in candidates:
        if key.algorithm != header.get("alg"):
            continue
        try:
            obj = jws.deserialize_compact(token, key.jose, algorithms=ALGORITHMS)
        except (JoseError, ValueError):
            continue
        claims = orjson.loads(obj.payload)
        if isinstance(claims, dict):
            return claims
    raise TokenInvalid("the token's signature matches none of the service-account keys")
