"""The RBAC authorizer (``--authorization-mode=RBAC``), as upstream's.

For a request it visits, in order, the ClusterRoleBindings whose subjects
name the user (or one of its groups, or its service account), then — for a
namespaced request — the RoleBindings of that namespace; each binding's role
is resolved (a RoleBinding may name a Role of its namespace or a
ClusterRole) and the first rule that allows the request decides ALLOW. RBAC
never denies: with no allowing rule the answer is NO_OPINION (the next
authorizer is asked), with the resolution errors as the reason
(``RBAC: clusterrole.rbac.authorization.k8s.io "x" not found``).

The rules a user holds in a namespace (:meth:`RBACAuthorizer.rules_for`) feed
SelfSubjectRulesReview and the escalation check. Resolved rule lists are
memoised per (user, groups, namespace) until any RBAC object changes.
"""

from __future__ import annotations

from typing import Any, Sequence

from k8py.apiserver.authn.user import UserInfo
from k8py.apiserver.authz.attributes import Attributes, Decision
from k8py.apiserver.authz.policy_index import Binding, PolicyLister, subject_keys
from k8py.apiserver.authz.rules import rules_allow

__all__ = ["RBACAuthorizer", "ResolvedRules"]

Object = dict[str, Any]
_MEMO_LIMIT = 4096


class ResolvedRules:
    """The rules of one user in one scope, and what could not be resolved."""

    __slots__ = ("rules", "errors")

    def __init__(self, rules: list[Object], errors: list[str]) -> None:
        self.rules = rules
        self.errors = errors


class RBACAuthorizer:
    def __init__(self, policy: PolicyLister) -> None:
        self.policy = policy
        self._memo: dict[tuple[Any, ...], ResolvedRules] = {}
        self._memo_stamp: tuple[Any, ...] = ()

    def _resolve(self, bindings: Sequence[Binding]) -> ResolvedRules:
        rules: list[Object] = []
        errors: list[str] = []
        for binding in bindings:
            if binding.role_kind == "ClusterRole":
                found = self.policy.cluster_role_rules(binding.role_name)
                missing = f'clusterrole.rbac.authorization.k8s.io "{binding.role_name}" not found'
            elif binding.role_kind == "Role" and binding.kind == "RoleBinding":
                found = self.policy.role_rules(binding.namespace, binding.role_name)
                missing = f'role.rbac.authorization.k8s.io "{binding.role_name}" not found'
            else:
                continue
            if found is None:
                errors.append(missing)
            else:
                rules.extend(found)
        return ResolvedRules(rules, errors)

    def _scoped(self, user: UserInfo, namespace: str) -> ResolvedRules:
        """Rules from ClusterRoleBindings (namespace "") or from one namespace's RoleBindings."""
        stamp = self.policy.stamp()
        if stamp != self._memo_stamp or len(self._memo) > _MEMO_LIMIT:
            self._memo = {}
            self._memo_stamp = stamp
        key = (user.name, user.groups, namespace)
        resolved = self._memo.get(key)
        if resolved is None:
            keys = subject_keys(user)
            if namespace:
                bindings = self.policy.role_bindings_for(namespace, keys)
            else:
                bindings = self.policy.cluster_role_bindings_for(keys)
            resolved = self._memo[key] = self._resolve(bindings)
        return resolved

    def rules_for(self, user: UserInfo, namespace: str) -> ResolvedRules:
        """Every rule ``user`` holds in ``namespace`` ("" = cluster-wide only)."""
        cluster = self._scoped(user, "")
        if not namespace:
            return cluster
        local = self._scoped(user, namespace)
        return ResolvedRules(cluster.rules + local.rules, cluster.errors + local.errors)

    async def authorize(self, attributes: Attributes) -> tuple[Decision, str]:
        return self.authorize_now(attributes)

    def authorize_now(self, attributes: Attributes) -> tuple[Decision, str]:
        """The decision, without awaiting (everything is in memory)."""
        cluster = self._scoped(attributes.user, "")
        if rules_allow(attributes, cluster.rules):
            return Decision.ALLOW, ""
        errors = cluster.errors
        if attributes.namespace and attributes.resource_request:
            local = self._scoped(attributes.user, attributes.namespace)
            if rules_allow(attributes, local.rules):
                return Decision.ALLOW, ""
            errors = errors + local.errors
        if not errors:
            return Decision.NO_OPINION, ""
        return Decision.NO_OPINION, "RBAC: " + (errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")
