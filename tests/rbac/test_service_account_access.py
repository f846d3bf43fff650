"""A pod's service account, authenticated by a bound token (TokenRequest), may list
pods only once a RoleBinding grants it, and loses that when the binding goes."""

from __future__ import annotations

import json
import time

import kubernetes
import pytest

RBAC = "rbac.authorization.k8s.io"


def test_a_service_account_lists_pods_only_after_a_rolebinding(clients) -> None:
    admin = clients.api("admin-token")
    core = kubernetes.client.CoreV1Api(admin)
    core.create_namespaced_service_account("default", {"metadata": {"name": "robot"}})
    token = core.create_namespaced_service_account_token("robot", "default", {"spec": {"expirationSeconds": 3600}}).status.token
    robot = kubernetes.client.CoreV1Api(clients.api(token))
    with pytest.raises(kubernetes.client.ApiException) as err:
        robot.list_namespaced_pod("default")
    assert json.loads(err.value.body)["message"] == (
        'pods is forbidden: User "system:serviceaccount:default:robot" cannot list resource "pods" in API group "" '
        'in the namespace "default"')
    rbac = kubernetes.client.RbacAuthorizationV1Api(admin)
    rbac.create_namespaced_role("default", {"metadata": {"name": "pod-reader"}, "rules": [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]})
    rbac.create_namespaced_role_binding("default", {"metadata": {"name": "robot-reads"},
                                                    "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "pod-reader"},
                                                    "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": "default"}]})
    deadline = time.monotonic() + 30
    while True:  # the authorizer reads the watch cache: the binding counts once it has arrived there
        try:
            assert robot.list_namespaced_pod("default").items == []
            break
        except kubernetes.client.ApiException as err:
            assert err.status == 403 and time.monotonic() < deadline
            time.sleep(0.02)
    with pytest.raises(kubernetes.client.ApiException) as err:
        robot.list_namespaced_pod("kube-system")
    assert err.value.status == 403
    rbac.delete_namespaced_role_binding("robot-reads", "default")
    deadline = time.monotonic() + 30
    while True:  # the authorizer reads the watch cache: the deletion shows as soon as it has arrived there
        try:
            robot.list_namespaced_pod("default")
        except kubernetes.client.ApiException as err:
            assert err.status == 403
            break
        assert time.monotonic() < deadline
        time.sleep(0.02)
