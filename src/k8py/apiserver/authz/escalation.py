"""The escalation and bind checks on writes of RBAC objects (upstream's ``registry/rbac`` policy-based storage).

One may not grant permissions one does not hold:

- creating or updating a Role or ClusterRole whose rules the requesting user
  does not hold (in the role's namespace, or cluster-wide for a ClusterRole)
  is refused, unless the user may ``escalate`` that role; a ClusterRole with
  an ``aggregationRule`` needs cluster-admin-like power (``*`` on everything)
  or ``escalate``;
- creating or updating a binding whose role grants what the user does not hold
  is refused, unless the user may ``bind`` that role
  (``verb=bind resource=roles|clusterroles name=<role>``).

``system:masters`` and the server's own writes (no request user) skip the
checks. The refusal is upstream's Forbidden, e.g. ``roles.rbac.authorization.k8s.io
"r" is forbidden: user "bob" (groups=["system:authenticated"]) is attempting to
grant RBAC permissions not currently held:\\n{APIGroups:[""], Resources:["pods"],
Verbs:["create"]}``.

These run as store hooks (after defaulting, before validation and the write),
reading the user from :data:`~k8py.apiserver.authz.filter.REQUEST_USER`.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from k8py.api.errors import Forbidden, InternalError
from k8py.apiserver.authn.user import SYSTEM_MASTERS, UserInfo
from k8py.apiserver.authz.attributes import Attributes, Authorizer, Decision
from k8py.apiserver.authz.filter import current_user
from k8py.apiserver.authz.rbac import RBACAuthorizer
from k8py.apiserver.authz.rules import compact_string, go_quote_list, uncovered
from k8py.apiserver.registry import ResourceDefinition

__all__ = ["EscalationCheck"]

Object = dict[str, Any]
GROUP = "rbac.authorization.k8s.io"
_ROLES = {"roles": "Role", "clusterroles": "ClusterRole"}
_BINDINGS = {"rolebindings": "RoleBinding", "clusterrolebindings": "ClusterRoleBinding"}
_FULL_AUTHORITY = [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, {"nonResourceURLs": ["*"], "verbs": ["*"]}]


class EscalationCheck:
    """Both an ``allocate_new`` hook and an ``UpdateAllocator`` of the object store."""

    def __init__(self, authorizer: Authorizer, rbac: RBACAuthorizer,
                 consistent: Callable[[], Awaitable[bool]] | None = None) -> None:
        self.authorizer = authorizer
        self.rbac = rbac
        #: waits for the watch cache to catch up with the store, so that a role
        #: written just before its binding is seen (upstream reads the store here)
        self.consistent = consistent

    def applies(self, definition: ResourceDefinition) -> bool:
        return definition.group == GROUP and (definition.plural in _ROLES or definition.plural in _BINDINGS)

    async def __call__(self, definition: ResourceDefinition, obj: Object, *, dry_run: bool) -> Callable[[], Awaitable[None]] | None:
        if self.applies(definition):
            await self.check(definition, obj)
        return None

    async def allocate_update(self, definition: ResourceDefinition, old: Object, new: Object, *, dry_run: bool) -> None:
        if definition.plural in _ROLES and old.get("rules") == new.get("rules") \
                and old.get("aggregationRule") == new.get("aggregationRule"):
            return  # nothing granted changed (labels, finalizers, ...)
        if definition.plural in _BINDINGS and old.get("subjects") == new.get("subjects") \
                and old.get("roleRef") == new.get("roleRef"):
            return
        await self.check(definition, new)

    async def release_unused(self, old: Object, new: Object, stored: Object | None) -> None:
        return None

    async def _allowed(self, user: UserInfo, verb: str, resource: str, namespace: str, name: str) -> bool:
        decision, _ = await self.authorizer.authorize(Attributes(
            user=user, verb=verb, api_group=GROUP, api_version="v1", resource=resource, namespace=namespace, name=name))
        return decision is Decision.ALLOW

    def _confirm_no_escalation(self, user: UserInfo, namespace: str, requested: list[Object]) -> str:
        """"" when ``user`` holds ``requested`` in ``namespace``; else the reason."""
        held = self.rbac.rules_for(user, namespace)
        missing = uncovered(held.rules, requested)
        if not missing:
            return ""
        message = (f'user "{user.name}" (groups={go_quote_list(user.groups)}) is attempting to grant RBAC permissions '
                   "not currently held:\n" + "\n".join(compact_string(r) for r in missing))
        if held.errors:
            message += "; resolution errors: [" + ", ".join(held.errors) + "]"
        return message

    async def check(self, definition: ResourceDefinition, obj: Object) -> None:
        user = current_user()
        if user is None or SYSTEM_MASTERS in user.groups:
            return
        if self.consistent is not None:
            await self.consistent()
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace", "") if definition.namespaced else ""
        name = meta.get("name", "")
        qualified = f"{definition.plural}.{GROUP}"
        if definition.plural in _ROLES:
            if await self._allowed(user, "escalate", definition.plural, namespace, name):
                return
            if obj.get("aggregationRule") and self._confirm_no_escalation(user, namespace, _FULL_AUTHORITY):
                raise Forbidden(f'{qualified} "{name}" is forbidden: must have cluster-admin privileges to use the aggregationRule',
                                name=name, group=GROUP, kind=definition.plural)
            reason = self._confirm_no_escalation(user, namespace, [r for r in obj.get("rules") or [] if isinstance(r, dict)])
        else:
            ref = obj.get("roleRef") or {}
            role_kind, role_name = ref.get("kind", ""), ref.get("name", "")
            role_resource = "clusterroles" if role_kind == "ClusterRole" else "roles"
            if await self._allowed(user, "bind", role_resource, namespace, role_name):
                return
            if role_kind == "ClusterRole":
                rules = self.rbac.policy.cluster_role_rules(role_name)
                missing_role = f'clusterroles.rbac.authorization.k8s.io "{role_name}" not found'
            else:
                rules = self.rbac.policy.role_rules(namespace, role_name)
                missing_role = f'roles.rbac.authorization.k8s.io "{role_name}" not found'
            if rules is None:
                raise InternalError(missing_role)
            reason = self._confirm_no_escalation(user, namespace, list(rules))
        if reason:
            raise Forbidden(f'{qualified} "{name}" is forbidden: {reason}', name=name, group=GROUP, kind=definition.plural)
