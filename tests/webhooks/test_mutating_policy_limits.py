"""Upstream's limits on MutatingAdmissionPolicy mutations, through kubectl and a real API server: an
ApplyConfiguration may not set an atomic list, map or struct (JSONPatch may); the mutations of one
evaluation share the runtime cost budget."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.support.kube import Kubectl
from tests.support.servers import ServerThread, sqlite_storage

pytestmark = pytest.mark.kubectl

V1ALPHA1 = "admissionregistration.k8s.io/v1alpha1"


def policy(name: str, resource: str, mutations: list[dict]) -> str:
    return yaml.safe_dump_all([
        {"apiVersion": V1ALPHA1, "kind": "MutatingAdmissionPolicy", "metadata": {"name": name},
         "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                                          "resources": [resource]}]},
                  "mutations": mutations}},
        {"apiVersion": V1ALPHA1, "kind": "MutatingAdmissionPolicyBinding", "metadata": {"name": name},
         "spec": {"policyName": name}}])


def apply_configuration(expression: str) -> dict:
    return {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": expression}}


def json_patch(expression: str) -> dict:
    return {"patchType": "JSONPatch", "jsonPatch": {"expression": expression}}


POD = json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "app"},
                  "spec": {"containers": [{"name": "app", "image": "busybox", "args": ["sleep", "1"]}]}})


@pytest.fixture
def kubectl(tmp_path):
    with ServerThread(sqlite_storage(str(tmp_path / "data")), feature_gates={"MutatingAdmissionPolicy": True}) as server:
        yield Kubectl(server.url, str(tmp_path / "home"))


def settle(kubectl: Kubectl) -> None:
    kubectl.run("get", "mutatingadmissionpolicies,mutatingadmissionpolicybindings")


def test_an_apply_configuration_may_not_set_an_atomic_list_but_a_json_patch_may(kubectl):
    kubectl.run("create", "-f", "-", input=policy("args.example.com", "pods", [apply_configuration(
        "Object{spec: Object.spec{containers: [Object.spec.containers{name: 'app', args: ['sleep', '2']}]}}")]))
    settle(kubectl)
    refused = kubectl.run("create", "-f", "-", input=POD, check=False)
    assert refused.returncode == 1
    assert refused.stderr == (
        'Error from server (InternalError): error when creating "STDIN": Internal error occurred: '
        "MutatingAdmissionPolicy 'args.example.com' with binding 'args.example.com' failed: error applying patch: "
        'invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: .spec.containers[name="app"].args\n')
    kubectl.run("delete", "mutatingadmissionpolicy,mutatingadmissionpolicybinding", "args.example.com")
    kubectl.run("create", "-f", "-", input=policy("args-patch.example.com", "pods", [
        json_patch("[JSONPatch{op: 'replace', path: '/spec/containers/0/args', value: ['sleep', '2']}]"),
        apply_configuration("Object{spec: Object.spec{containers: [Object.spec.containers{name: 'app', image: 'busybox:1'}]}}")]))
    settle(kubectl)
    kubectl.run("create", "-f", "-", input=POD)
    container = json.loads(kubectl.run("get", "pod", "app", "-o", "json").stdout)["spec"]["containers"][0]
    assert (container["args"], container["image"]) == (["sleep", "2"], "busybox:1")  # a granular field may be set


# 200,440 cel-go cost units each (a look through 9,999 items): 49 fit in the 10,000,000 budget, a 50th does not
COSTLY = "object.data.items.split(',').exists(x, x == 'none') ? [] : []"


def test_the_mutations_of_one_evaluation_share_the_runtime_cost_budget(kubectl):
    items = ",".join(str(i) for i in range(9999))
    configmap = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "{name}"}, "data": {"items": items}})
    kubectl.run("create", "-f", "-", input=policy("costly.example.com", "configmaps", [json_patch(COSTLY)] * 49))
    settle(kubectl)
    kubectl.run("create", "-f", "-", input=configmap.replace("{name}", "fits"))
    kubectl.run("delete", "mutatingadmissionpolicy,mutatingadmissionpolicybinding", "costly.example.com")
    kubectl.run("create", "-f", "-", input=policy("costlier.example.com", "configmaps", [json_patch(COSTLY)] * 50))
    settle(kubectl)
    refused = kubectl.run("create", "-f", "-", input=configmap.replace("{name}", "too-much"), check=False)
    assert refused.returncode == 1
    assert ("MutatingAdmissionPolicy 'costlier.example.com' with binding 'costlier.example.com' failed: "
            f"expression '{COSTLY}' resulted in error: operation cancelled: actual cost limit exceeded") in refused.stderr
