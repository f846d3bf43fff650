"""What an authorizer decides on, as Kubernetes' ``authorizer.Attributes``.

A resource request carries verb, API group, version, resource, subresource,
namespace and name; a non-resource request (``/healthz``, ``/version``,
``/apis``) carries only the verb (the lower-cased HTTP method: get, post, …)
and the path. Verbs are upstream's: get, list, watch, create, update, patch,
delete, deletecollection, plus impersonate, bind, escalate, approve, sign, use.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol

from k8py.apiserver.authn.user import UserInfo

__all__ = ["Attributes", "Decision", "Authorizer", "AlwaysAllow"]


class Decision(enum.Enum):
    ALLOW = "allow"
    DENY = "deny"
    NO_OPINION = "no-opinion"


@dataclass(frozen=True, slots=True)
class Attributes:
    user: UserInfo
    verb: str
    resource_request: bool = True
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""


class Authorizer(Protocol):
    async def authorize(self, attributes: Attributes) -> tuple[Decision, str]:
        """The decision and the reason (shown in the Forbidden message when not empty)."""
        ...


class AlwaysAllow:
    """``--authorization-mode=AlwaysAllow``: the default of a server without RBAC."""

    async def authorize(self, attributes: Attributes) -> tuple[Decision, str]:
        return Decision.ALLOW, ""
