"""Service-account tokens on the server: issuing bound tokens and authenticating both kinds.

:class:`ServiceAccountTokens` holds what the API server's flags say
(``--service-account-issuer`` (repeatable: the first signs, all are accepted),
``--service-account-signing-key-file``, ``--service-account-key-file``,
``--api-audiences``, ``--service-account-max-token-expiration``,
``--service-account-extend-token-expiration``). :class:`TokenIssuer` signs
TokenRequests; :class:`ServiceAccountTokenAuthenticator` is the chain's
:class:`~k8py.apiserver.authn.authenticator.TokenAuthenticator` for them.

What the authenticator checks, in upstream's order (``pkg/serviceaccount``):

1. a JWT whose ``iss`` is one of ours or the legacy issuer, else "not mine"
   (``None``: another authenticator, OIDC say, may know it);
2. the signature, with any verifying key;
3. bound tokens: ``exp``/``nbf`` (one minute of leeway, as go-jose), an
   audience shared with the API audiences (or a TokenReview's own), then the
   bound objects: the service account, the pod or secret or node, each still
   existing with the uid in the token, and not deleted more than a minute ago;
4. legacy tokens: the Secret still exists and holds this very token, and its
   service account exists with the same uid.

Objects are read from the watch cache through :class:`ObjectLookup` (never
the store: this runs on every request). A signature that verified is
remembered (a bounded LRU of :data:`VERIFIED_CACHE_SIZE` tokens): checking
one costs hundreds of microseconds, a client sends the same token for up to
an hour; every other check runs on every request, so expiry and deleted
objects take effect at once. A token that fails any check raises
:class:`~k8py.api.errors.Unauthorized`; the reason is logged and a TokenReview
shows it, the client sees only 401.

Time is :attr:`ServiceAccountTokens.clock` (seconds since the epoch), injectable.
"""

from __future__ import annotations

import base64
import hmac
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Protocol

from k8py.api.errors import Unauthorized
from k8py.api.service_account_keys import SigningKey, VerifyingKey
from k8py.api.service_account_token import (
    LEGACY_ISSUER, Ref, TokenInvalid, bound_claims, sign, unverified_claims, verify_signature,
)
from k8py.apiserver.authn.user import ALL_AUTHENTICATED, UserInfo

__all__ = [
    "ServiceAccountTokens", "ObjectLookup", "TokenIssuer", "ServiceAccountTokenAuthenticator",
    "service_account_user", "DEFAULT_ISSUER", "WARN_ONLY_EXPIRATION", "EXTENDED_EXPIRATION",
]

log = logging.getLogger(__name__)

DEFAULT_ISSUER = "https://kubernetes.default.svc.cluster.local"
#: a projected token asking for exactly this many seconds is really given a year
#: (``--service-account-extend-token-expiration``), with ``warnafter`` at this
WARN_ONLY_EXPIRATION = 3607
EXTENDED_EXPIRATION = 365 * 24 * 3600
LEEWAY = 60
VERIFIED_CACHE_SIZE = 4096
#: a bound object deleted longer ago than this no longer vouches for a token
DELETION_GRACE = 60

POD_NAME_KEY = "authentication.kubernetes.io/pod-name"
POD_UID_KEY = "authentication.kubernetes.io/pod-uid"
NODE_NAME_KEY = "authentication.kubernetes.io/node-name"
NODE_UID_KEY = "authentication.kubernetes.io/node-uid"
CREDENTIAL_ID_KEY = "authentication.kubernetes.io/credential-id"


class ObjectLookup(Protocol):
    """A core/v1 object as the watch cache has it, or None (the server implements it)."""

    def get(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None: ...


@dataclass
class ServiceAccountTokens:
    """The service-account token configuration of one API server."""

    issuers: tuple[str, ...] = (DEFAULT_ISSUER,)
    signing_key: SigningKey | None = None
    verifying_keys: list[VerifyingKey] = field(default_factory=list)
    #: what a token must be meant for; empty: the first issuer (upstream's default)
    api_audiences: tuple[str, ...] = ()
    #: the longest a TokenRequest is granted (seconds); None: no cap
    max_expiration: int | None = None
    extend_expiration: bool = True
    #: where the OIDC discovery document says the keys are ("" = issuer + /openid/v1/jwks)
    jwks_uri: str = ""
    clock: Callable[[], float] = time.time

    def __post_init__(self) -> None:
        if not self.issuers:
            self.issuers = (DEFAULT_ISSUER,)
        if not self.api_audiences:
            self.api_audiences = (self.issuers[0],)
        if self.signing_key is not None and all(k.kid != self.signing_key.kid for k in self.verifying_keys):
            self.verifying_keys = [*self.verifying_keys, self.signing_key.verifying]

    @property
    def issuer(self) -> str:
        return self.issuers[0]


def service_account_user(namespace: str, name: str, uid: str, extra: dict[str, tuple[str, ...]] | None = None) -> UserInfo:
    """Who a service account's token authenticates as (upstream ``serviceaccount.UserInfo``)."""
    return UserInfo(
        name=f"system:serviceaccount:{namespace}:{name}",
        uid=uid,
        groups=("system:serviceaccounts", f"system:serviceaccounts:{namespace}", ALL_AUTHENTICATED),
        extra=extra or {},
    )


class TokenIssuer:
    """Signs bound tokens for TokenRequests (``serviceaccounts/token``)."""

    def __init__(self, config: ServiceAccountTokens) -> None:
        self.config = config

    @property
    def enabled(self) -> bool:
        return self.config.signing_key is not None

    def granted_expiration(self, requested: int) -> tuple[int, int | None]:
        """(seconds the token lives, warnafter offset or None) for ``requested`` seconds."""
        c = self.config
        if c.extend_expiration and requested == WARN_ONLY_EXPIRATION:
            return max(EXTENDED_EXPIRATION, requested), WARN_ONLY_EXPIRATION
        if c.max_expiration is not None and requested > c.max_expiration:
            return c.max_expiration, None
        return requested, None

    def issue(
        self, *, namespace: str, service_account: Ref, audiences: Iterable[str], expiration_seconds: int,
        pod: Ref | None = None, secret: Ref | None = None, node: Ref | None = None,
    ) -> tuple[str, int]:
        """(token, expiry as seconds since the epoch)."""
        key = self.config.signing_key
        if key is None:
            raise RuntimeError("no --service-account-signing-key-file: this server does not issue tokens")
        now = int(self.config.clock())
        lifetime, warn = self.granted_expiration(expiration_seconds)
        claims = bound_claims(
            issuer=self.config.issuer, audiences=audiences, namespace=namespace, service_account=service_account,
            issued_at=now, expires_at=now + lifetime, pod=pod, secret=secret, node=node,
            warn_after=None if warn is None else now + warn,
        )
        return sign(claims, key), now + lifetime


def _deleted_too_long_ago(obj: dict[str, Any], now: float) -> bool:
    stamp = (obj.get("metadata") or {}).get("deletionTimestamp")
    if not stamp:
        return False
    try:
        when = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()
    except ValueError:
        return True
    return when < now - DELETION_GRACE


class ServiceAccountTokenAuthenticator:
    """Bound and legacy service-account JWTs -> ``system:serviceaccount:NS:NAME``."""

    def __init__(self, config: ServiceAccountTokens, lookup: ObjectLookup) -> None:
        self.config = config
        self.lookup = lookup
        #: token -> its claims, for tokens whose signature verified (LRU order)
        self._verified: OrderedDict[str, dict[str, Any]] = OrderedDict()

    async def authenticate_token(self, token: str) -> UserInfo | None:
        return self.authenticate(token)

    def authenticate(self, token: str, audiences: Iterable[str] | None = None) -> UserInfo | None:
        """The token's user; None if it is not a service-account token; Unauthorized if invalid.

        ``audiences``: what the token must be meant for (a TokenReview's
        ``spec.audiences``); the API audiences when None."""
        claims = self._verified.get(token)
        if claims is None:
            parsed = unverified_claims(token)
            if parsed is None:
                return None
            if parsed[1].get("iss") != LEGACY_ISSUER and parsed[1].get("iss") not in self.config.issuers:
                return None
            try:
                claims = verify_signature(token, self.config.verifying_keys)
            except TokenInvalid as err:
                raise self._invalid(str(err)) from None
            self._verified[token] = claims
            if len(self._verified) > VERIFIED_CACHE_SIZE:
                self._verified.popitem(last=False)
        else:
            self._verified.move_to_end(token)
        issuer = claims.get("iss")
        if issuer == LEGACY_ISSUER:
            return self._legacy(token, claims)
        return self._bound(claims, tuple(audiences) if audiences else self.config.api_audiences)

    def _invalid(self, reason: str) -> Unauthorized:
        log.info("service account token rejected", extra={"reason": reason})
        return Unauthorized(reason)

    def _service_account(self, namespace: str, ref: Ref | None) -> dict[str, Any]:
        if ref is None:
            raise self._invalid("the token names no service account")
        sa = self.lookup.get("serviceaccounts", namespace, ref.name)
        if sa is None:
            raise self._invalid(f'service account "{namespace}/{ref.name}" not found')
        uid = (sa.get("metadata") or {}).get("uid", "")
        if ref.uid and uid != ref.uid:
            raise self._invalid(f"service account UID ({ref.uid}) does not match claim ({uid})")
        return sa

    def _bound(self, claims: dict[str, Any], audiences: tuple[str, ...]) -> UserInfo:
        now = self.config.clock()
        exp, nbf = claims.get("exp"), claims.get("nbf")
        if not isinstance(exp, (int, float)) or now > exp + LEEWAY:
            raise self._invalid("service account token has expired")
        if isinstance(nbf, (int, float)) and now < nbf - LEEWAY:
            raise self._invalid("service account token is not valid yet")
        aud = claims.get("aud")
        token_audiences = [aud] if isinstance(aud, str) else list(aud or ())
        if not set(token_audiences) & set(audiences):
            raise self._invalid("token audiences " + repr(token_audiences) + " is invalid for the target audiences " + repr(list(audiences)))
        private = claims.get("kubernetes.io")
        if not isinstance(private, dict) or not private.get("namespace"):
            raise self._invalid("the token has no kubernetes.io claims")
        namespace = str(private["namespace"])
        sa_ref = Ref.from_claim(private.get("serviceaccount"))
        sa = self._service_account(namespace, sa_ref)
        assert sa_ref is not None
        extra: dict[str, tuple[str, ...]] = {}
        for kind, plural, ns in (("pod", "pods", namespace), ("secret", "secrets", namespace), ("node", "nodes", "")):
            ref = Ref.from_claim(private.get(kind))
            if ref is None:
                continue
            obj = self.lookup.get(plural, ns, ref.name)
            if obj is None:
                raise self._invalid(f'{kind} "{ref.name}" not found')
            uid = (obj.get("metadata") or {}).get("uid", "")
            if ref.uid and uid != ref.uid:
                raise self._invalid(f"{kind} UID ({ref.uid}) does not match claim ({uid})")
            if _deleted_too_long_ago(obj, now):
                raise self._invalid(f'token bound to {kind} "{ref.name}" has been invalidated (the {kind} is being deleted)')
            if kind == "pod":
                extra[POD_NAME_KEY], extra[POD_UID_KEY] = (ref.name,), (ref.uid,)
            if kind == "node":
                extra[NODE_NAME_KEY], extra[NODE_UID_KEY] = (ref.name,), (ref.uid,)
        if claims.get("jti"):
            extra[CREDENTIAL_ID_KEY] = (f"JTI={claims['jti']}",)
        return service_account_user(namespace, sa_ref.name, (sa.get("metadata") or {}).get("uid", ""), extra)

    def _legacy(self, token: str, claims: dict[str, Any]) -> UserInfo:
        namespace = str(claims.get("kubernetes.io/serviceaccount/namespace") or "")
        secret_name = str(claims.get("kubernetes.io/serviceaccount/secret.name") or "")
        sa_ref = Ref(str(claims.get("kubernetes.io/serviceaccount/service-account.name") or ""),
                     str(claims.get("kubernetes.io/serviceaccount/service-account.uid") or ""))
        if not namespace or not secret_name or not sa_ref.name:
            raise self._invalid("the legacy token lacks its namespace, secret or service account claims")
        secret = self.lookup.get("secrets", namespace, secret_name)
        if secret is None:
            raise self._invalid(f'secret "{namespace}/{secret_name}" referenced by the token not found')
        if (secret.get("metadata") or {}).get("deletionTimestamp"):
            raise self._invalid(f'secret "{namespace}/{secret_name}" is being deleted')
        stored = base64.b64decode(((secret.get("data") or {}).get("token") or "").encode() or b"")
        if not hmac.compare_digest(stored, token.encode()):
            raise self._invalid(f'the token does not match secret "{namespace}/{secret_name}"')
        sa = self._service_account(namespace, sa_ref)
        return service_account_user(namespace, sa_ref.name, (sa.get("metadata") or {}).get("uid", ""))
