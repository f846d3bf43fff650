"""authorization.k8s.io/v1 access reviews: `kubectl auth can-i` (with and without
--list) answers as upstream for users bound to each bootstrap role, and
SubjectAccessReview carries upstream's reasons."""

from __future__ import annotations

import json
import re

import kubernetes
import pytest

from k8py.apiserver.authz.bootstrap_policy import cluster_roles

RBAC = "rbac.authorization.k8s.io"
ROLES = {r["metadata"]["name"]: r for r in cluster_roles()}


def _list_rows(output: str) -> list[tuple[str, str, str, str]]:
    """kubectl auth can-i --list rows: (resource, non-resource URLs, resource names, verbs)."""
    lines = output.rstrip("\n").splitlines()
    header = lines[0]
    cols = [header.index(h) for h in ("Resources", "Non-Resource URLs", "Resource Names", "Verbs")]
    rows = []
    for line in lines[1:]:
        cells = [line[cols[i]:(cols[i + 1] if i + 1 < len(cols) else None)].strip() for i in range(4)]
        rows.append(tuple(cells))  # type: ignore[arg-type]
    return rows  # type: ignore[return-value]


def _words(cell: str) -> set[str]:
    return set(re.findall(r"[^\[\] ]+", cell))


def _shown(group: str, resource: str) -> str:
    """How kubectl prints a rule's resource: ``pods``, ``deployments.apps``, ``daemonsets.apps/status``, ``*.*``."""
    if group == "*" and resource == "*":
        return "*.*"
    base, _, sub = resource.partition("/")
    name = f"{base}.{group}" if group else base
    return f"{name}/{sub}" if sub else name


def _bind_cluster(admin, role: str, user: str) -> None:
    kubernetes.client.RbacAuthorizationV1Api(admin).create_cluster_role_binding({
        "metadata": {"name": f"{user}-{role}".replace(":", "-")},
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "User", "name": user, "apiGroup": RBAC}]})


def _role_rules(admin, name: str) -> list[dict]:
    role = kubernetes.client.RbacAuthorizationV1Api(admin).read_cluster_role(name)
    return [admin.sanitize_for_serialization(r) for r in role.rules or []]


@pytest.mark.parametrize("role", ["view", "edit", "admin", "system:node-proxier", "system:kube-dns", "system:monitoring",
                                  "system:heapster", "system:kubelet-api-admin", "system:auth-delegator",
                                  "system:controller:replicaset-controller", "system:volume-scheduler"])
def test_can_i_list_shows_every_rule_of_a_bootstrap_role(clients, role) -> None:
    admin = clients.api("admin-token")
    user = "user-" + role.replace(":", "-")
    _bind_cluster(admin, role, user)
    out = clients.kubectl("alice-token")._kubectl.run(f"--as={user}", "auth", "can-i", "--list")
    rows = _list_rows(out.stdout)
    assert out.stderr == ""
    # every rule of the role (as aggregated, for admin/edit/view) appears, and nothing beyond it and system:basic-user's
    extra_ok = {"selfsubjectreviews.authentication.k8s.io", "selfsubjectaccessreviews.authorization.k8s.io",
                "selfsubjectrulesreviews.authorization.k8s.io", ""}
    rules = _role_rules(admin, role)
    granted: dict[tuple[str, str, str], set[str]] = {}
    for resource, urls, names, verbs in rows:
        granted.setdefault((resource, urls, names), set()).update(_words(verbs))
    for rule in rules:
        names = "[" + " ".join(rule.get("resource_names") or rule.get("resourceNames") or []) + "]"
        for group in rule.get("apiGroups") or []:
            for resource in rule.get("resources") or []:
                shown = _shown(group, resource)
                assert set(rule["verbs"]) <= granted.get((shown, "[]", names), set()), (shown, rule)
        for url in rule.get("nonResourceURLs") or []:
            assert set(rule["verbs"]) <= granted.get(("", f"[{url}]", "[]"), set()), (url, rule)
    shown_resources = {r for r, _, _, _ in rows} - extra_ok
    expected = {_shown(g, res) for rule in rules for g in rule.get("apiGroups") or [] for res in rule.get("resources") or []}
    assert shown_resources == expected


def test_can_i_answers_for_the_user_facing_roles(clients) -> None:
    admin = clients.api("admin-token")
    rbac = kubernetes.client.RbacAuthorizationV1Api(admin)
    for user, role in (("vic", "view"), ("eddie", "edit"), ("ada", "admin")):
        rbac.create_namespaced_role_binding("default", {
            "metadata": {"name": user}, "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "User", "name": user, "apiGroup": RBAC}]})
    kubectl = clients.kubectl("alice-token")._kubectl

    def can(user: str, *args: str) -> str:
        result = kubectl.run(f"--as={user}", "auth", "can-i", *args, check=False)
        assert result.returncode == (0 if result.stdout.startswith("yes") else 1)
        return result.stdout.strip()

    assert can("vic", "list", "pods") == "yes"
    assert can("vic", "get", "pods", "--subresource=log") == "yes"
    assert can("vic", "get", "secrets") == "no"
    assert can("vic", "create", "deployments.apps") == "no"
    assert can("vic", "list", "pods", "-n", "kube-system") == "no"
    assert can("vic", "list", "pods.metrics.k8s.io") == "yes"  # kubectl top, through system:aggregated-metrics-reader
    assert can("eddie", "create", "deployments.apps") == "yes"
    assert can("eddie", "get", "secrets") == "yes"
    assert can("eddie", "create", "pods/exec") == "yes"
    assert can("eddie", "patch", "pods", "--subresource=ephemeralcontainers") == "yes"  # kubectl debug
    assert can("ada", "update", "pods", "--subresource=ephemeralcontainers") == "yes"
    assert can("vic", "patch", "pods", "--subresource=ephemeralcontainers") == "no"
    assert can("eddie", "create", "rolebindings.rbac.authorization.k8s.io") == "no"
    assert can("eddie", "update", "resourcequotas") == "no"
    assert can("ada", "create", "rolebindings.rbac.authorization.k8s.io") == "yes"
    assert can("ada", "create", "localsubjectaccessreviews.authorization.k8s.io") == "yes"
    assert can("ada", "create", "namespaces") == "no"
    assert can("ada", "get", "/healthz") == "yes"
    assert can("ada", "get", "/metrics") == "no"


def test_system_masters_may_do_anything_and_list_says_so(clients) -> None:
    out = clients.kubectl("admin-token").run("auth", "can-i", "--list").stdout
    assert _list_rows(out) == [("*.*", "[]", "[]", "[*]"), ("", "[*]", "[]", "[*]")]


def test_a_node_is_told_its_list_is_incomplete(clients) -> None:
    out = clients.kubectl("node-a-token").run("auth", "can-i", "--list")
    assert out.stderr == "Warning: the list may be incomplete: node authorizer does not support user rule resolution\n"


def test_subject_access_review_reports_who_allowed_and_why_not(clients) -> None:
    admin = clients.api("admin-token")
    authz = kubernetes.client.AuthorizationV1Api(admin)
    review = authz.create_subject_access_review({"spec": {
        "user": "someone", "groups": ["system:authenticated"],
        "resourceAttributes": {"verb": "create", "group": "authorization.k8s.io", "resource": "selfsubjectaccessreviews"}}})
    assert review.status.allowed is True
    assert review.status.reason == ('RBAC: allowed by ClusterRoleBinding "system:basic-user" of ClusterRole '
                                    '"system:basic-user" to Group "system:authenticated"')
    review = authz.create_subject_access_review({"spec": {
        "user": "someone", "nonResourceAttributes": {"verb": "get", "path": "/metrics"}}})
    assert (review.status.allowed, review.status.denied, review.status.reason) == (False, None, None)
    local = authz.create_namespaced_local_subject_access_review("default", {"spec": {
        "user": "system:serviceaccount:default:robot", "groups": ["system:serviceaccounts"],
        "resourceAttributes": {"verb": "list", "resource": "pods"}}})
    assert local.status.allowed is False and local.metadata.namespace == "default"
    kubernetes.client.RbacAuthorizationV1Api(admin).create_namespaced_role_binding("default", {
        "metadata": {"name": "robot"}, "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": "default"}]})
    local = authz.create_namespaced_local_subject_access_review("default", {"spec": {
        "user": "system:serviceaccount:default:robot", "resourceAttributes": {"verb": "list", "resource": "pods"}}})
    assert local.status.allowed is True
    assert local.status.reason == ('RBAC: allowed by RoleBinding "robot/default" of ClusterRole "view" to '
                                   'ServiceAccount "robot/default"')
    with pytest.raises(kubernetes.client.ApiException) as err:
        authz.create_subject_access_review({"spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}})
    assert err.value.status == 422
    assert json.loads(err.value.body)["message"] == (
        'SubjectAccessReview.authorization.k8s.io "" is invalid: spec.user: Invalid value: "": at least one of user or '
        'group must be specified')
