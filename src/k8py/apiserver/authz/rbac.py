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
from k8py.apiserver.authz.rules import rule_allows

__all__ = ["RBACAuthorizer", "ResolvedRules"]

Object = dict[str, Any]
_MEMO_LIMIT = 4096


class ResolvedRules:
    """The rules of one user in one scope, the binding each came through
    (``sources[i]`` describes ``rules[i]``), and what could not be resolved."""

    __slots__ = ("rules", "sources", "errors")

    def __init__(self, rules: list[Object], sources: list[str], errors: list[str]) -> None:
        self.rules = rules
        self.sources = sources
        self.errors = errors

    def allowing(self, attributes: Attributes) -> str | None:
        """The description of the binding whose rule allows the request, or None."""
        for rule, source in zip(self.rules, self.sources):
            if rule_allows(attributes, rule):
                return source
        return None


class RBACAuthorizer:
    def __init__(self, policy: PolicyLister) -> None:
        self.policy = policy
        self._memo: dict[tuple[Any, ...], ResolvedRules] = {}
        self._memo_stamp: tuple[Any, ...] = ()

    def _resolve(self, bindings: Sequence[Binding]) -> ResolvedRules:
        rules: list[Object] = []
        sources: list[str] = []
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
                sources.extend([binding.describe()] * len(found))
        return ResolvedRules(rules, sources, errors)

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
        return ResolvedRules(cluster.rules + local.rules, cluster.sources + local.sources, cluster.errors + local.errors)

    def rules_review(self, user: UserInfo, namespace: str) -> tuple[list[Object], list[Object], bool, list[str]]:
        """As SelfSubjectRulesReview reports them: (resource rules, non-resource rules, incomplete, errors)."""
        resolved = self.rules_for(user, namespace)
        resource: list[Object] = []
        non_resource: list[Object] = []
        for rule in resolved.rules:
            if rule.get("resources"):
                resource.append({k: rule[k] for k in ("verbs", "apiGroups", "resources", "resourceNames") if rule.get(k)})
            if rule.get("nonResourceURLs"):
                non_resource.append({"verbs": rule.get("verbs") or [], "nonResourceURLs": rule["nonResourceURLs"]})
        return resource, non_resource, bool(resolved.errors), list(resolved.errors)

    async def authorize(self, attributes: Attributes) -> tuple[Decision, str]:
        return self.authorize_now(attributes)

    def authorize_now(self, attributes: Attributes) -> tuple[Decision, str]:
        """The decision, without awaiting (everything is in memory)."""
        cluster = self._scoped(attributes.user, "")
        source = cluster.allowing(attributes)
        if source is not None:
            return Decision.ALLOW, f"RBAC: allowed by {source}"
        errors = cluster.errors
        if attributes.namespace and attributes.resource_request:
            local = self._scoped(attributes.user, attributes.namespace)
            source = local.allowing(attributes)
            if source is not None:
                return Decision.ALLOW, f"RBAC: allowed by {source}"
            errors = errors + local.errors
        if not errors:
            return Decision.NO_OPINION, ""
        return Decision.NO_OPINION, "RBAC: " + (errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")
