"""The authorizer chain ``--authorization-mode`` builds, and the Forbidden message.

Modes are asked in the order given (upstream's union authorizer): the first
that says ALLOW or DENY decides; NO_OPINION passes to the next; reasons of
those that had no opinion are joined with ", " for the message. In front of
any chain that is not AlwaysAllow sits upstream's privileged-group authorizer:
``system:masters`` may do anything, without a lookup.

The message of a refused request is upstream's ``forbiddenMessage`` byte for
byte, e.g. ``pods is forbidden: User "alice" cannot create resource "pods" in
API group "" in the namespace "default"``, with ``: <reason>`` appended when
an authorizer gave one.
"""

from __future__ import annotations

from typing import Any, Sequence

from k8py.api.errors import Forbidden
from k8py.apiserver.authn.user import SYSTEM_MASTERS, UserInfo
from k8py.apiserver.authz.attributes import AlwaysAllow, Attributes, Authorizer, Decision

__all__ = ["Union", "AlwaysDeny", "MODES", "forbidden", "forbidden_message", "parse_modes"]

MODES = ("AlwaysAllow", "AlwaysDeny", "Node", "RBAC")
Object = dict[str, Any]


class AlwaysDeny:
    async def authorize(self, attributes: Attributes) -> tuple[Decision, str]:
        return Decision.NO_OPINION, "Everything is forbidden."


class Union:
    """Authorizers asked in order, behind the privileged-group shortcut."""

    def __init__(self, authorizers: Sequence[Authorizer], *, privileged_groups: Sequence[str] = (SYSTEM_MASTERS,)) -> None:
        self.authorizers = list(authorizers)
        self.privileged_groups = frozenset(privileged_groups)
        self.always_allow = any(isinstance(a, AlwaysAllow) for a in self.authorizers[:1])

    def allows_everything(self, user: UserInfo) -> bool:
        """True when any request of ``user`` is allowed without looking at it (system:masters, AlwaysAllow)."""
        return self.always_allow or not self.privileged_groups.isdisjoint(user.groups)

    async def authorize(self, attributes: Attributes) -> tuple[Decision, str]:
        if self.allows_everything(attributes.user):
            return Decision.ALLOW, ""
        reasons: list[str] = []
        for authorizer in self.authorizers:
            decision, reason = await authorizer.authorize(attributes)
            if decision is not Decision.NO_OPINION:
                return decision, reason
            if reason:
                reasons.append(reason)
        return Decision.NO_OPINION, ", ".join(reasons)


    def rules_for(self, user: UserInfo, namespace: str) -> tuple[list[Object], list[Object], bool, list[str]]:
        """(resource rules, non-resource rules, incomplete, evaluation errors) of ``user`` in
        ``namespace``, gathered from every authorizer that can list them (SelfSubjectRulesReview)."""
        if self.always_allow or not self.privileged_groups.isdisjoint(user.groups):
            return ([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                    [{"verbs": ["*"], "nonResourceURLs": ["*"]}], False, [])
        resource: list[Object] = []
        non_resource: list[Object] = []
        incomplete = False
        errors: list[str] = []
        for authorizer in self.authorizers:
            lister = getattr(authorizer, "rules_review", None)
            if lister is None:
                continue
            r, n, inc, errs = lister(user, namespace)
            resource += r
            non_resource += n
            incomplete = incomplete or inc
            errors += errs
        return resource, non_resource, incomplete, errors


def parse_modes(value: str) -> list[str]:
    """``Node,RBAC`` → ["Node", "RBAC"]; a usage error names the modes there are."""
    modes = [m.strip() for m in value.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if not modes or unknown:
        raise ValueError(f"unknown mode {unknown[0] if unknown else '(none)'!r}; "
                         f"use a comma-separated list of {', '.join(MODES)} (e.g. Node,RBAC)")
    if len(set(modes)) != len(modes):
        raise ValueError(f"{value!r} names a mode twice")
    return modes


def forbidden_message(attributes: Attributes) -> str:
    user = attributes.user.name
    if not attributes.resource_request:
        return f'User "{user}" cannot {attributes.verb} path "{attributes.path}"'
    resource = attributes.resource
    if attributes.subresource:
        resource = f"{resource}/{attributes.subresource}"
    if attributes.namespace:
        return (f'User "{user}" cannot {attributes.verb} resource "{resource}" in API group '
                f'"{attributes.api_group}" in the namespace "{attributes.namespace}"')
    return f'User "{user}" cannot {attributes.verb} resource "{resource}" in API group "{attributes.api_group}" at the cluster scope'


def forbidden(attributes: Attributes, reason: str) -> Forbidden:
    """The 403 upstream's ``responsewriters.Forbidden`` writes."""
    message = forbidden_message(attributes)
    if reason:
        message = f"{message}: {reason}"
    resource = attributes.resource if attributes.resource_request else ""
    qualified = f"{resource}.{attributes.api_group}" if attributes.api_group and resource else resource
    if attributes.name and attributes.resource_request:
        full = f'{qualified} "{attributes.name}" is forbidden: {message}'
    else:
        full = f"{qualified} is forbidden: {message}" if qualified else f"forbidden: {message}"
    return Forbidden(full, name=attributes.name if attributes.resource_request else "", group=attributes.api_group,
                     kind=resource)
