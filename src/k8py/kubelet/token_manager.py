"""Service-account tokens for projected volumes: requested, cached, refreshed (upstream ``kubelet/token``).

A projected ``serviceAccountToken`` source (``audience``, ``expirationSeconds``
(default 3600, at least 600), ``path``) becomes a TokenRequest for the pod's
service account, bound to the pod by name and uid. Tokens are cached per
(namespace, service account, audience, expirationSeconds, pod uid), and a
cached token is requested again once

- it is older than 24 hours, or
- less than 20% of its requested life is left (it has lived 80% of it),

each moved earlier by up to ten seconds of jitter so a node's pods do not all
ask at once (upstream's ``requiresRefresh``; the issue time is the expiry
minus the *requested* seconds, as upstream computes it). When a refresh
fails, the cached token is used while it has not expired.

The volume manager asks at every volume refresh and writes the token with
the ``..data`` swap, so a process reading the file sees the old or the new
token, never half of one. Time is the injectable ``clock`` (seconds since the
epoch), the jitter the injectable ``jitter`` (seconds, default random).
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Awaitable, Callable, Mapping

from k8py.api.errors import StatusError

__all__ = ["TokenManager", "TokenSource", "MAX_TTL", "MAX_JITTER"]

logger = logging.getLogger(__name__)

MAX_TTL = 24 * 3600.0
MAX_JITTER = 10.0
DEFAULT_EXPIRATION = 3600

#: (namespace, service account, TokenRequest body) -> the TokenRequest as answered
RequestToken = Callable[[str, str, dict[str, Any]], Awaitable[dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class TokenSource:
    """One projected ``serviceAccountToken`` of one pod."""

    namespace: str
    service_account: str
    pod_name: str
    pod_uid: str
    audience: str = ""
    expiration_seconds: int = DEFAULT_EXPIRATION

    @classmethod
    def of(cls, pod: Mapping[str, Any], source: Mapping[str, Any]) -> "TokenSource":
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        return cls(
            namespace=meta.get("namespace", "default"),
            service_account=spec.get("serviceAccountName") or "default",
            pod_name=meta.get("name", ""), pod_uid=meta.get("uid", ""),
            audience=source.get("audience") or "",
            expiration_seconds=int(source.get("expirationSeconds") or DEFAULT_EXPIRATION),
        )


@dataclass(slots=True)
class _Cached:
    token: str
    expires: float
    requested_seconds: int


def _parse(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


class TokenManager:
    def __init__(self, request: RequestToken, *, clock: Callable[[], float] = time.time,
                 jitter: Callable[[], float] | None = None) -> None:
        self._request = request
        self._clock = clock
        self._jitter = jitter or (lambda: random.random() * MAX_JITTER)
        self._cache: dict[TokenSource, _Cached] = {}

    def requires_refresh(self, cached: _Cached) -> bool:
        now = self._clock()
        jitter = self._jitter()
        issued = cached.expires - cached.requested_seconds
        if now > issued + MAX_TTL - jitter:
            return True
        return now > cached.expires - cached.requested_seconds * 0.2 - jitter

    async def token(self, source: TokenSource) -> str:
        """The token for ``source``: the cached one, or a new one when it is due (see the module docstring)."""
        cached = self._cache.get(source)
        if cached is not None and not self.requires_refresh(cached):
            return cached.token
        spec: dict[str, Any] = {
            "expirationSeconds": source.expiration_seconds,
            "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": source.pod_name, "uid": source.pod_uid},
        }
        if source.audience:
            spec["audiences"] = [source.audience]
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
        try:
            reply = await self._request(source.namespace, source.service_account, body)
        except (StatusError, OSError) as err:
            if cached is not None and self._clock() < cached.expires:
                logger.warning("token refresh failed; using the cached token", extra={
                    "pod": f"{source.namespace}/{source.pod_name}", "error": str(err)})
                return cached.token
            raise
        status = reply.get("status") or {}
        fresh = _Cached(str(status.get("token") or ""), _parse(str(status.get("expirationTimestamp"))),
                        int((reply.get("spec") or {}).get("expirationSeconds") or source.expiration_seconds))
        self._cache[source] = fresh
        return fresh.token

    def forget_pod(self, uid: str) -> None:
        """Drop the tokens of a pod that is gone."""
        for key in [k for k in self._cache if k.pod_uid == uid]:
            del self._cache[key]
