"""The identity of a request, as Kubernetes' ``user.Info`` carries it.

Invariants: a :class:`UserInfo` is immutable, and once the authentication
middleware has run every request carries exactly one in ``request[USER_KEY]``
(also for the insecure port and for a server started without any
authenticator, where it is :data:`UNSECURED`). Groups always include
``system:authenticated`` for an authenticated user and ``system:unauthenticated``
for :data:`ANONYMOUS`, as upstream adds them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from aiohttp import web

__all__ = [
    "UserInfo", "USER_KEY", "ANONYMOUS", "UNSECURED",
    "ALL_AUTHENTICATED", "ALL_UNAUTHENTICATED", "SYSTEM_MASTERS", "ANONYMOUS_USER",
]

ALL_AUTHENTICATED = "system:authenticated"
ALL_UNAUTHENTICATED = "system:unauthenticated"
SYSTEM_MASTERS = "system:masters"
ANONYMOUS_USER = "system:anonymous"


@dataclass(frozen=True, slots=True)
class UserInfo:
    """A user name, its uid, its groups and the authenticator's extra fields."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def to_api(self) -> dict[str, Any]:
        """As ``authentication.k8s.io/v1`` UserInfo (TokenReview, AdmissionReview, audit)."""
        out: dict[str, Any] = {"username": self.name}
        if self.uid:
            out["uid"] = self.uid
        if self.groups:
            out["groups"] = list(self.groups)
        if self.extra:
            out["extra"] = {k: list(v) for k, v in self.extra.items()}
        return out

    @classmethod
    def from_api(cls, body: Mapping[str, Any]) -> "UserInfo":
        extra = body.get("extra") or {}
        return cls(
            name=str(body.get("username") or ""),
            uid=str(body.get("uid") or ""),
            groups=tuple(body.get("groups") or ()),
            extra={str(k): tuple(v or ()) for k, v in extra.items()},
        )


#: who a request is when no credential was given and anonymous auth is on
ANONYMOUS = UserInfo(ANONYMOUS_USER, groups=(ALL_UNAUTHENTICATED,))

#: who a request on the insecure port (or to a server without authenticators)
#: is: upstream's insecure port served everyone as a member of system:masters
UNSECURED = UserInfo("system:unsecured", groups=(SYSTEM_MASTERS, ALL_AUTHENTICATED))

#: where the authentication middleware puts the request's identity
USER_KEY = web.RequestKey("k8py.user", UserInfo)
