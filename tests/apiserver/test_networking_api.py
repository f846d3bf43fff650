"""networking.k8s.io/v1 is served as upstream serves it: kubectl resolves Ingress, IngressClass and
NetworkPolicy by plural and short name, an Ingress's path needs a supported pathType and a backend,
its status is written through /status, and the official client reads a NetworkPolicy back."""

from __future__ import annotations

import json

import pytest
from kubernetes import client

from tests.support.kube import Kubectl

pytestmark = pytest.mark.kubectl

INGRESS = {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "web"},
           "spec": {"rules": [{"host": "web.example", "http": {"paths": [
               {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}}


def test_kubectl_discovers_the_networking_kinds(kubectl: Kubectl) -> None:
    out = kubectl.run("api-resources", "--api-group=networking.k8s.io").stdout
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    assert {"ingresses", "ingressclasses", "networkpolicies"} <= set(rows)
    assert rows["ingresses"][1] == "ing" and rows["networkpolicies"][1] == "netpol"


def test_an_ingress_is_validated_and_its_status_written_through_the_subresource(kubectl: Kubectl, k8s) -> None:
    bad = json.loads(json.dumps(INGRESS))
    bad["spec"]["rules"][0]["http"]["paths"][0]["pathType"] = "Glob"
    refused = kubectl.run("create", "-f", "-", input=json.dumps(bad), check=False)
    assert refused.returncode != 0 and 'Unsupported value: "Glob"' in refused.stderr
    kubectl.run("create", "-f", "-", input=json.dumps(INGRESS))
    header, row = kubectl.run("get", "ing", "web").stdout.splitlines()
    assert header.split() == ["NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"]
    assert row.split()[:4] == ["web", "<none>", "web.example", "80"]
    api = client.NetworkingV1Api(k8s)
    api.patch_namespaced_ingress_status("web", "default", {"status": {"loadBalancer": {"ingress": [{"ip": "127.0.0.9"}]}}})
    got = api.read_namespaced_ingress("web", "default")
    assert got.status.load_balancer.ingress[0].ip == "127.0.0.9" and got.metadata.generation == 1
    assert kubectl.run("get", "ing", "web", "--no-headers").stdout.split()[3] == "127.0.0.9"


def test_the_official_client_writes_a_network_policy(k8s) -> None:
    api = client.NetworkingV1Api(k8s)
    body = client.V1NetworkPolicy(metadata=client.V1ObjectMeta(name="deny"),
                                  spec=client.V1NetworkPolicySpec(pod_selector=client.V1LabelSelector(), policy_types=["Ingress"]))
    api.create_namespaced_network_policy("default", body)
    assert [p.metadata.name for p in api.list_network_policy_for_all_namespaces().items] == ["deny"]
    assert api.read_namespaced_network_policy("deny", "default").spec.policy_types == ["Ingress"]
