"""Bootstrap tokens: ``<id>.<secret>`` bearer tokens kept as Secrets in kube-system.

A token ``abcdef.0123456789abcdef`` (6 and 16 characters of ``[a-z0-9]``) is
valid while the Secret ``kube-system/bootstrap-token-abcdef`` exists, has type
``bootstrap.kubernetes.io/token``, ``token-id`` and ``token-secret`` equal to
the token's halves, ``usage-bootstrap-authentication: "true"``, is not being
deleted, and its optional ``expiration`` (RFC 3339) is in the future. The user
is ``system:bootstrap:<id>`` in ``system:bootstrappers`` plus the Secret's
``auth-extra-groups`` (each must start with ``system:bootstrappers:``), as
upstream's ``plugin/pkg/auth/authenticator/token/bootstrap``.

A token of the right shape is always "mine": a bad one raises Unauthorized.
Secrets come from the watch cache through the same
:class:`~k8py.apiserver.authn.service_account.ObjectLookup`. Time is injectable.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import logging
import re
import time
from datetime import datetime
from typing import Any, Callable

from k8py.api.errors import Unauthorized
from k8py.apiserver.authn.service_account import ObjectLookup
from k8py.apiserver.authn.user import ALL_AUTHENTICATED, UserInfo

__all__ = ["BootstrapTokenAuthenticator", "TOKEN_PATTERN", "SECRET_TYPE", "BOOTSTRAPPERS_GROUP"]

log = logging.getLogger(__name__)

TOKEN_PATTERN = re.compile(r"^([a-z0-9]{6})\.([a-z0-9]{16})$")
SECRET_TYPE = "bootstrap.kubernetes.io/token"
SECRET_PREFIX = "bootstrap-token-"
BOOTSTRAPPERS_GROUP = "system:bootstrappers"
_EXTRA_GROUP = re.compile(r"^system:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]$")


def _field(secret: dict[str, Any], key: str) -> str:
    value = (secret.get("data") or {}).get(key)
    if value is None:
        return str((secret.get("stringData") or {}).get(key) or "")
    try:
        return base64.b64decode(value).decode()
    except (binascii.Error, UnicodeDecodeError):
        return ""


def _parse_time(text: str) -> float | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class BootstrapTokenAuthenticator:
    def __init__(self, lookup: ObjectLookup, *, clock: Callable[[], float] = time.time) -> None:
        self.lookup = lookup
        self.clock = clock

    async def authenticate_token(self, token: str) -> UserInfo | None:
        return self.authenticate(token)

    def _invalid(self, token_id: str, reason: str) -> Unauthorized:
        log.info("bootstrap token rejected", extra={"token_id": token_id, "reason": reason})
        return Unauthorized(reason)

    def authenticate(self, token: str) -> UserInfo | None:
        m = TOKEN_PATTERN.match(token)
        if m is None:
            return None
        token_id, token_secret = m.groups()
        secret = self.lookup.get("secrets", "kube-system", SECRET_PREFIX + token_id)
        if secret is None:
            raise self._invalid(token_id, f"no bootstrap token secret kube-system/{SECRET_PREFIX}{token_id}")
        if (secret.get("metadata") or {}).get("deletionTimestamp"):
            raise self._invalid(token_id, "the bootstrap token's secret is being deleted")
        if secret.get("type") != SECRET_TYPE:
            raise self._invalid(token_id, f"the secret's type is {secret.get('type')!r}, not {SECRET_TYPE!r}")
        if not hmac.compare_digest(_field(secret, "token-secret").encode(), token_secret.encode()) or _field(secret, "token-id") != token_id:
            raise self._invalid(token_id, "the token does not match its secret")
        expiration = _field(secret, "expiration")
        if expiration:
            when = _parse_time(expiration)
            if when is None or self.clock() >= when:
                raise self._invalid(token_id, f"the bootstrap token expired at {expiration}")
        if _field(secret, "usage-bootstrap-authentication") != "true":
            raise self._invalid(token_id, "the bootstrap token is not marked usage-bootstrap-authentication")
        extra_groups = [g.strip() for g in _field(secret, "auth-extra-groups").split(",") if g.strip()]
        for group in extra_groups:
            if not _EXTRA_GROUP.match(group):
                raise self._invalid(token_id, f"auth-extra-groups {group!r} must start with system:bootstrappers:")
        groups = [BOOTSTRAPPERS_GROUP, *(g for g in extra_groups if g != BOOTSTRAPPERS_GROUP), ALL_AUTHENTICATED]
        return UserInfo(name=f"system:bootstrap:{token_id}", groups=tuple(groups))
