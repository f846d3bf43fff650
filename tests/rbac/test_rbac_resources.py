"""rbac.authorization.k8s.io/v1 served as upstream: kubectl create role/clusterrole/
rolebinding/clusterrolebinding, the printer columns, and validation messages."""

from __future__ import annotations

import json

import kubernetes
import pytest


def rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.strip().splitlines()]


def test_kubectl_create_role_and_rolebinding_print_as_upstream(kubectl) -> None:
    out = kubectl.run("create", "role", "pod-reader", "--verb=get,list", "--resource=pods,pods/log").stdout
    assert out.strip() == "role.rbac.authorization.k8s.io/pod-reader created"
    role = json.loads(kubectl.run("get", "role", "pod-reader", "-o", "json").stdout)
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"]}]
    out = kubectl.run("create", "rolebinding", "read-pods", "--role=pod-reader", "--user=alice", "--group=devs",
                      "--serviceaccount=default:robot").stdout
    assert out.strip() == "rolebinding.rbac.authorization.k8s.io/read-pods created"
    table = rows(kubectl.run("get", "rolebindings", "-o", "wide").stdout)
    assert table[0] == ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"]
    assert table[1][:2] == ["read-pods", "Role/pod-reader"]
    assert table[1][3:] == ["alice", "devs", "default/robot"]
    assert rows(kubectl.run("get", "roles").stdout)[0] == ["NAME", "CREATED", "AT"]


def test_kubectl_create_clusterrole_with_non_resource_urls_and_aggregation(kubectl) -> None:
    kubectl.run("create", "clusterrole", "metrics", "--verb=get", "--non-resource-url=/metrics,/healthz/*")
    role = json.loads(kubectl.run("get", "clusterrole", "metrics", "-o", "json").stdout)
    assert role["rules"] == [{"nonResourceURLs": ["/metrics", "/healthz/*"], "verbs": ["get"]}]
    kubectl.run("create", "clusterrole", "agg", "--aggregation-rule=team=a")
    agg = json.loads(kubectl.run("get", "clusterrole", "agg", "-o", "json").stdout)
    assert agg["aggregationRule"] == {"clusterRoleSelectors": [{"matchLabels": {"team": "a"}}]}
    out = kubectl.run("create", "clusterrolebinding", "m", "--clusterrole=metrics", "--group=ops").stdout
    assert out.strip() == "clusterrolebinding.rbac.authorization.k8s.io/m created"
    table = rows(kubectl.run("get", "clusterrolebinding", "m").stdout)
    assert table[0] == ["NAME", "ROLE", "AGE"] and table[1][:2] == ["m", "ClusterRole/metrics"]


def test_a_namespaced_role_may_not_name_non_resource_urls(k8s) -> None:
    rbac = kubernetes.client.RbacAuthorizationV1Api(k8s)
    with pytest.raises(kubernetes.client.ApiException) as err:
        rbac.create_namespaced_role("default", {"metadata": {"name": "bad"}, "rules": [
            {"verbs": ["get"], "nonResourceURLs": ["/healthz"]}, {"apiGroups": [""], "resources": ["pods"], "verbs": []}]})
    assert err.value.status == 422
    body = json.loads(err.value.body)
    assert body["message"] == (
        'Role.rbac.authorization.k8s.io "bad" is invalid: [rules[0].nonResourceURLs: Invalid value: '
        '[]string{"/healthz"}: namespaced rules cannot apply to non-resource URLs, rules[1].verbs: Required value: verbs must contain at least one value]')


def test_a_bindings_role_ref_cannot_change(k8s) -> None:
    rbac = kubernetes.client.RbacAuthorizationV1Api(k8s)
    ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}
    rbac.create_namespaced_role_binding("default", {"metadata": {"name": "b"}, "roleRef": ref,
                                                    "subjects": [{"kind": "User", "name": "bob"}]})
    got = rbac.read_namespaced_role_binding("b", "default")
    assert got.subjects[0].api_group == "rbac.authorization.k8s.io"  # defaulted
    with pytest.raises(kubernetes.client.ApiException) as err:
        rbac.patch_namespaced_role_binding("b", "default", {"roleRef": {**ref, "name": "edit"}})
    assert err.value.status == 422
    assert "roleRef: Invalid value" in json.loads(err.value.body)["message"]
    assert "cannot change roleRef" in json.loads(err.value.body)["message"]
