"""The authorization step with --authorization-mode=Node,RBAC: upstream's Forbidden
messages byte for byte, and RBAC rules (verbs, subresources, resourceNames,
non-resource URLs) deciding real requests from kubectl and the official client."""

from __future__ import annotations

import json

import kubernetes
import pytest


def _status(err: kubernetes.client.ApiException) -> dict:
    return json.loads(err.body)


def _bind(admin: kubernetes.client.ApiClient, role: str, user: str, namespace: str = "default", kind: str = "ClusterRole",
          name: str = "") -> None:
    kubernetes.client.RbacAuthorizationV1Api(admin).create_namespaced_role_binding(namespace, {
        "metadata": {"name": name or f"{user}-{role}"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
        "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}]})


def test_a_user_bound_to_view_is_forbidden_to_create_with_upstreams_message(clients) -> None:
    admin = clients.api("admin-token")
    _bind(admin, "view", "alice")
    alice = clients.kubectl("alice-token")
    assert alice.run("get", "pods").stderr.strip() == "No resources found in default namespace."
    out = alice.run("create", "configmap", "c", "--from-literal=a=b", check=False)
    assert out.returncode == 1
    assert out.stderr == ('error: failed to create configmap: configmaps is forbidden: User "alice" cannot create resource '
                          '"configmaps" in API group "" in the namespace "default"\n')
    with pytest.raises(kubernetes.client.ApiException) as err:
        kubernetes.client.AppsV1Api(clients.api("alice-token")).create_namespaced_deployment("default", {
            "metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
                "metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
    assert err.value.status == 403
    assert _status(err.value) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'deployments.apps is forbidden: User "alice" cannot create resource "deployments" in API group "apps" '
                   'in the namespace "default"',
        "reason": "Forbidden", "details": {"group": "apps", "kind": "deployments"}, "code": 403}


def test_forbidden_messages_for_names_cluster_scope_subresources_and_paths(clients) -> None:
    bob = clients.kubectl("bob-token")
    out = bob.run("get", "secret", "s1", check=False)
    assert out.stderr == ('Error from server (Forbidden): secrets "s1" is forbidden: User "bob" cannot get resource "secrets" '
                          'in API group "" in the namespace "default"\n')
    out = bob.run("get", "nodes", check=False)
    assert out.stderr == ('Error from server (Forbidden): nodes is forbidden: User "bob" cannot list resource "nodes" '
                          'in API group "" at the cluster scope\n')
    out = bob.run("logs", "p", check=False)
    assert 'cannot get resource "pods/log"' not in out.stderr  # kubectl first GETs the pod
    assert out.stderr == ('Error from server (Forbidden): pods "p" is forbidden: User "bob" cannot get resource "pods" '
                          'in API group "" in the namespace "default"\n')
    out = bob.run("get", "--raw", "/metrics", check=False)
    assert out.stderr == 'Error from server (Forbidden): forbidden: User "bob" cannot get path "/metrics"\n'
    # discovery and health are open to every authenticated user
    assert bob.run("get", "--raw", "/healthz").stdout == "ok"
    assert json.loads(bob.run("get", "--raw", "/version").stdout)["major"] == "1"


def test_a_binding_to_a_missing_role_is_named_in_the_reason(clients) -> None:
    admin = clients.api("admin-token")
    _bind(admin, "no-such-role", "alice")
    out = clients.kubectl("alice-token").run("get", "pods", check=False)
    assert out.stderr == ('Error from server (Forbidden): pods is forbidden: User "alice" cannot list resource "pods" in API '
                          'group "" in the namespace "default": RBAC: clusterrole.rbac.authorization.k8s.io "no-such-role" '
                          'not found\n')


def test_rules_with_subresources_resource_names_and_wildcards(clients) -> None:
    admin = clients.api("admin-token")
    rbac = kubernetes.client.RbacAuthorizationV1Api(admin)
    rbac.create_namespaced_role("default", {"metadata": {"name": "narrow"}, "rules": [
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["allowed"], "verbs": ["get", "list", "update"]},
        {"apiGroups": ["*"], "resources": ["*/scale"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
    ]})
    _bind(admin, "narrow", "bob", kind="Role")
    core = kubernetes.client.CoreV1Api(admin)
    for name in ("allowed", "other"):
        core.create_namespaced_config_map("default", {"metadata": {"name": name}})
    bob = kubernetes.client.CoreV1Api(clients.api("bob-token"))
    assert bob.read_namespaced_config_map("allowed", "default").metadata.name == "allowed"
    with pytest.raises(kubernetes.client.ApiException) as err:
        bob.read_namespaced_config_map("other", "default")
    assert _status(err.value)["message"] == ('configmaps "other" is forbidden: User "bob" cannot get resource "configmaps" '
                                             'in API group "" in the namespace "default"')
    with pytest.raises(kubernetes.client.ApiException) as err:
        bob.list_namespaced_config_map("default")  # a list is not about one name
    assert err.value.status == 403
    # a list pinned to the name by fieldSelector is about that name (upstream's RequestInfo)
    assert [c.metadata.name for c in bob.list_namespaced_config_map("default", field_selector="metadata.name=allowed").items] == ["allowed"]
    apps = kubernetes.client.AppsV1Api(clients.api("bob-token"))
    with pytest.raises(kubernetes.client.ApiException) as err:
        apps.read_namespaced_deployment_scale("missing", "default")
    assert err.value.status == 404  # */scale allowed the read: the deployment just does not exist
    with pytest.raises(kubernetes.client.ApiException) as err:
        apps.read_namespaced_deployment("missing", "default")
    assert err.value.status == 403


def test_a_websocket_exec_needs_create_as_well_as_get(clients, secured) -> None:
    import urllib.error
    import urllib.request

    admin = kubernetes.client.RbacAuthorizationV1Api(clients.api("admin-token"))
    admin.create_namespaced_role("default", {"metadata": {"name": "exec-get"}, "rules": [
        {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["get"]}]})
    _bind(clients.api("admin-token"), "exec-get", "bob", kind="Role")
    request = urllib.request.Request(f"{secured.url}/api/v1/namespaces/default/pods/p/exec?command=true&stdout=true",
                                     headers={"Authorization": "Bearer bob-token", "Connection": "Upgrade",
                                              "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
                                              "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
                                              "Sec-WebSocket-Protocol": "v5.channel.k8s.io"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(request, timeout=30)
    assert err.value.code == 403
    assert json.loads(err.value.read())["message"] == (
        'pods "p" is forbidden: User "bob" cannot create resource "pods/exec" in API group "" in the namespace "default"')
