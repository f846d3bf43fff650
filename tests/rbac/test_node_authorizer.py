"""The Node authorizer: a kubelet reads only the secrets, configmaps and claims of pods bound to it."""

from __future__ import annotations

import json

import kubernetes
import pytest


def _pod(name: str, node: str, secret: str, configmap: str) -> dict:
    return {"metadata": {"name": name}, "spec": {
        "nodeName": node,
        "containers": [{"name": "c", "image": "busybox", "envFrom": [{"configMapRef": {"name": configmap}}]}],
        "volumes": [{"name": "s", "secret": {"secretName": secret}}]}}


@pytest.fixture
def two_nodes(clients):
    core = kubernetes.client.CoreV1Api(clients.api("admin-token"))
    for n in ("a", "b"):
        core.create_namespaced_secret("default", {"metadata": {"name": f"s-{n}"}, "data": {"k": "YQ==" if n == "a" else "Yg=="}})
        core.create_namespaced_config_map("default", {"metadata": {"name": f"cm-{n}"}, "data": {"k": n}})
        core.create_namespaced_pod("default", _pod(f"p-{n}", f"node-{n}", f"s-{n}", f"cm-{n}"))
    return kubernetes.client.CoreV1Api(clients.api("node-a-token"))


def test_a_node_reads_its_pods_secrets_but_not_another_nodes(two_nodes) -> None:
    node_a = two_nodes
    assert node_a.read_namespaced_secret("s-a", "default").data["k"] == "YQ=="
    assert node_a.read_namespaced_config_map("cm-a", "default").data == {"k": "a"}
    with pytest.raises(kubernetes.client.ApiException) as err:
        node_a.read_namespaced_secret("s-b", "default")
    assert err.value.status == 403
    assert json.loads(err.value.body)["message"] == (
        'secrets "s-b" is forbidden: User "system:node:node-a" cannot get resource "secrets" in API group "" in the '
        "namespace \"default\": no relationship found between node 'node-a' and this object")
    with pytest.raises(kubernetes.client.ApiException) as err:
        node_a.read_namespaced_config_map("cm-b", "default")
    assert err.value.status == 403
    with pytest.raises(kubernetes.client.ApiException) as err:
        node_a.list_namespaced_secret("default")
    assert json.loads(err.value.body)["message"].endswith(": No Object name found")
    with pytest.raises(kubernetes.client.ApiException) as err:
        node_a.delete_namespaced_secret("s-a", "default")
    assert json.loads(err.value.body)["message"].endswith(": can only read resources of this type")


def test_a_node_gains_a_secret_when_a_pod_using_it_is_bound_to_it(two_nodes, clients) -> None:
    node_a = two_nodes
    core = kubernetes.client.CoreV1Api(clients.api("admin-token"))
    with pytest.raises(kubernetes.client.ApiException):
        node_a.read_namespaced_secret("s-b", "default")
    core.create_namespaced_pod("default", _pod("p-b-on-a", "node-a", "s-b", "cm-b"))
    assert node_a.read_namespaced_secret("s-b", "default").metadata.name == "s-b"
    core.delete_namespaced_pod("p-b-on-a", "default", grace_period_seconds=0)
    # a bound pod's deletion is graceful (its kubelet finishes it): it still references s-b until gone


def test_a_node_may_do_what_the_node_rules_allow_and_nothing_else(two_nodes, clients) -> None:
    node_a = two_nodes
    assert {p.metadata.name for p in node_a.list_namespaced_pod("default").items} == {"p-a", "p-b"}
    node_a.create_node({"metadata": {"name": "node-a"}})
    with pytest.raises(kubernetes.client.ApiException) as err:
        node_a.delete_namespace("default")
    assert err.value.status == 403
    assert json.loads(err.value.body)["message"] == (
        'namespaces "default" is forbidden: User "system:node:node-a" cannot delete resource "namespaces" in API group "" '
        'in the namespace "default"')
