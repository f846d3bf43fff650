"""NodeRestriction: a kubelet writes only its own Node, its own Lease, its pods' status, and mirror pods."""

from __future__ import annotations

import json

import kubernetes
import pytest


def _message(err: pytest.ExceptionInfo) -> str:
    return json.loads(err.value.body)["message"]


@pytest.fixture
def node_a(clients):
    core = kubernetes.client.CoreV1Api(clients.api("admin-token"))
    for n in ("a", "b"):
        core.create_node({"metadata": {"name": f"node-{n}"}})
        core.create_namespaced_pod("default", {"metadata": {"name": f"p-{n}"}, "spec": {
            "nodeName": f"node-{n}", "containers": [{"name": "c", "image": "busybox"}]}})
    return kubernetes.client.CoreV1Api(clients.api("node-a-token")), clients.api("node-a-token")


def test_a_node_updates_only_its_own_pods_status_and_node(node_a) -> None:
    core, _ = node_a
    core.patch_namespaced_pod_status("p-a", "default", {"status": {"message": "mine"}})
    with pytest.raises(kubernetes.client.ApiException) as err:
        core.patch_namespaced_pod_status("p-b", "default", {"status": {"message": "not mine"}})
    assert _message(err) == 'pods "p-b" is forbidden: node "node-a" can only update pod status for pods with spec.nodeName set to itself'
    core.patch_node_status("node-a", {"status": {"phase": "Running"}})
    with pytest.raises(kubernetes.client.ApiException) as err:
        core.patch_node("node-b", {"metadata": {"labels": {"x": "y"}}})
    assert _message(err) == 'nodes "node-b" is forbidden: node "node-a" is not allowed to modify node "node-b"'
    with pytest.raises(kubernetes.client.ApiException) as err:
        core.delete_namespaced_pod("p-b", "default")
    assert _message(err) == 'pods "p-b" is forbidden: node "node-a" can only delete pods with spec.nodeName set to itself'
    with pytest.raises(kubernetes.client.ApiException) as err:
        core.patch_namespaced_pod("p-a", "default", {"metadata": {"labels": {"x": "y"}}})
    assert err.value.status == 403


def test_a_node_creates_only_mirror_pods_bound_to_itself(node_a) -> None:
    core, _ = node_a
    pod = {"metadata": {"name": "static-node-a", "annotations": {"kubernetes.io/config.mirror": "abc"}},
           "spec": {"nodeName": "node-a", "containers": [{"name": "c", "image": "busybox"}]}}
    core.create_namespaced_pod("default", pod)
    with pytest.raises(kubernetes.client.ApiException) as err:
        core.create_namespaced_pod("default", {**pod, "metadata": {"name": "plain"}})
    assert _message(err) == ('pods "plain" is forbidden: pod does not have "kubernetes.io/config.mirror" annotation, '
                             'node "node-a" can only create mirror pods')
    with pytest.raises(kubernetes.client.ApiException) as err:
        core.create_namespaced_pod("default", {**pod, "metadata": {**pod["metadata"], "name": "elsewhere"},
                                               "spec": {**pod["spec"], "nodeName": "node-b"}})
    assert _message(err) == 'pods "elsewhere" is forbidden: node "node-a" can only create pods with spec.nodeName set to itself'
    with pytest.raises(kubernetes.client.ApiException) as err:
        core.create_node({"metadata": {"name": "node-c"}})
    assert _message(err) == 'nodes "node-c" is forbidden: node "node-a" is not allowed to modify node "node-c"'


def test_a_node_writes_only_its_own_lease(node_a, clients) -> None:
    _, api = node_a
    leases = kubernetes.client.CoordinationV1Api(api)
    leases.create_namespaced_lease("kube-node-lease", {"metadata": {"name": "node-a"}, "spec": {"holderIdentity": "node-a"}})
    with pytest.raises(kubernetes.client.ApiException) as err:
        leases.create_namespaced_lease("kube-node-lease", {"metadata": {"name": "node-b"}, "spec": {"holderIdentity": "node-a"}})
    assert err.value.status == 403
    kubernetes.client.CoordinationV1Api(clients.api("admin-token")).create_namespaced_lease(
        "kube-node-lease", {"metadata": {"name": "node-b"}, "spec": {"holderIdentity": "node-b"}})
    with pytest.raises(kubernetes.client.ApiException) as err:
        leases.patch_namespaced_lease("node-b", "kube-node-lease", {"spec": {"holderIdentity": "node-a"}})
    assert _message(err) == 'leases.coordination.k8s.io "node-b" is forbidden: node "node-a" is not allowed to modify lease "node-b"'
