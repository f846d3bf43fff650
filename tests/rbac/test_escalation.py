"""Escalation and bind checks: one may not grant, through a role or a binding,
permissions one does not hold, unless allowed the ``escalate`` or ``bind`` verb."""

from __future__ import annotations

import json

import kubernetes
import pytest

RBAC = "rbac.authorization.k8s.io"


def _ref(kind: str, name: str) -> dict:
    return {"apiGroup": RBAC, "kind": kind, "name": name}


@pytest.fixture
def bob(clients):
    """bob (groups devs) is ``admin`` of namespace default."""
    admin = kubernetes.client.RbacAuthorizationV1Api(clients.api("admin-token"))
    admin.create_namespaced_role_binding("default", {"metadata": {"name": "bob-admin"}, "roleRef": _ref("ClusterRole", "admin"),
                                                     "subjects": [{"kind": "User", "name": "bob", "apiGroup": RBAC}]})
    return kubernetes.client.RbacAuthorizationV1Api(clients.api("bob-token")), admin


def test_granting_what_one_holds_is_allowed_and_more_is_refused_with_upstreams_message(bob) -> None:
    rbac, _ = bob
    rbac.create_namespaced_role("default", {"metadata": {"name": "pods"}, "rules": [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "create"]}]})
    with pytest.raises(kubernetes.client.ApiException) as err:
        rbac.create_namespaced_role("default", {"metadata": {"name": "more"}, "rules": [
            {"apiGroups": [""], "resources": ["pods", "nodes"], "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["resourcequotas"], "verbs": ["get", "update", "delete"]}]})
    assert err.value.status == 403
    assert json.loads(err.value.body)["message"] == (
        'roles.rbac.authorization.k8s.io "more" is forbidden: user "bob" (groups=["devs" "system:authenticated"]) is '
        'attempting to grant RBAC permissions not currently held:\n'
        '{APIGroups:[""], Resources:["nodes"], Verbs:["get"]}\n'
        '{APIGroups:[""], Resources:["resourcequotas"], Verbs:["update" "delete"]}')
    # an update that adds what bob lacks is refused the same way
    with pytest.raises(kubernetes.client.ApiException) as err:
        rbac.patch_namespaced_role("pods", "default", {"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]})
    assert err.value.status == 403


def test_binding_a_role_one_does_not_hold_is_refused_until_bind_is_granted(bob) -> None:
    rbac, admin = bob
    binding = {"metadata": {"name": "carol-is-king"}, "roleRef": _ref("ClusterRole", "cluster-admin"),
               "subjects": [{"kind": "User", "name": "carol", "apiGroup": RBAC}]}
    with pytest.raises(kubernetes.client.ApiException) as err:
        rbac.create_namespaced_role_binding("default", binding)
    assert err.value.status == 403
    message = json.loads(err.value.body)["message"]
    assert message.startswith('rolebindings.rbac.authorization.k8s.io "carol-is-king" is forbidden: user "bob" '
                              '(groups=["devs" "system:authenticated"]) is attempting to grant RBAC permissions not currently held:\n')
    assert "{NonResourceURLs:[\"*\"], Verbs:[\"*\"]}" in message
    # binding "edit", whose every permission bob holds through admin, is fine
    rbac.create_namespaced_role_binding("default", {"metadata": {"name": "carol-edit"}, "roleRef": _ref("ClusterRole", "edit"),
                                                    "subjects": [{"kind": "User", "name": "carol", "apiGroup": RBAC}]})
    admin.create_cluster_role({"metadata": {"name": "bind-cluster-admin"}, "rules": [
        {"apiGroups": [RBAC], "resources": ["clusterroles"], "verbs": ["bind"], "resourceNames": ["cluster-admin"]}]})
    admin.create_cluster_role_binding({"metadata": {"name": "bob-binds"}, "roleRef": _ref("ClusterRole", "bind-cluster-admin"),
                                       "subjects": [{"kind": "User", "name": "bob", "apiGroup": RBAC}]})
    rbac.create_namespaced_role_binding("default", binding)


def test_escalate_allows_writing_any_role_and_aggregation_needs_full_power(bob, clients) -> None:
    rbac, admin = bob
    big = {"metadata": {"name": "big"}, "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["*"]}]}
    with pytest.raises(kubernetes.client.ApiException):
        rbac.create_namespaced_role("default", big)
    admin.create_cluster_role({"metadata": {"name": "escalator"}, "rules": [
        {"apiGroups": [RBAC], "resources": ["roles", "clusterroles"], "verbs": ["escalate", "create"]}]})
    admin.create_cluster_role_binding({"metadata": {"name": "bob-escalates"}, "roleRef": _ref("ClusterRole", "escalator"),
                                       "subjects": [{"kind": "User", "name": "bob", "apiGroup": RBAC}]})
    rbac.create_namespaced_role("default", big)
    # alice holds nothing: a ClusterRole with an aggregationRule is refused with upstream's message
    alice = kubernetes.client.RbacAuthorizationV1Api(clients.api("alice-token"))
    admin.create_cluster_role({"metadata": {"name": "role-writer"}, "rules": [
        {"apiGroups": [RBAC], "resources": ["clusterroles"], "verbs": ["create"]}]})
    admin.create_cluster_role_binding({"metadata": {"name": "alice-writes"}, "roleRef": _ref("ClusterRole", "role-writer"),
                                       "subjects": [{"kind": "User", "name": "alice", "apiGroup": RBAC}]})
    with pytest.raises(kubernetes.client.ApiException) as err:
        alice.create_cluster_role({"metadata": {"name": "agg"}, "aggregationRule": {
            "clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]}})
    assert json.loads(err.value.body)["message"] == (
        'clusterroles.rbac.authorization.k8s.io "agg" is forbidden: must have cluster-admin privileges to use the aggregationRule')
