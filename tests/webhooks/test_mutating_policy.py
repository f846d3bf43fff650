"""MutatingAdmissionPolicy (admissionregistration.k8s.io/v1alpha1) end to end,
through kubectl and a real API server: served only with its feature gate;
ApplyConfiguration and JSONPatch mutations with params and variables are
stored; a failing mutation refuses the write under failurePolicy Fail."""

from __future__ import annotations

import json

import pytest

from tests.support.kube import Kubectl
from tests.support.servers import ServerThread, sqlite_storage

pytestmark = pytest.mark.kubectl

POLICY = """\
apiVersion: admissionregistration.k8s.io/v1alpha1
kind: MutatingAdmissionPolicy
metadata: {name: stamp.example.com}
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE", "UPDATE"], resources: ["configmaps"]}]
  matchConditions:
  - {name: not-params, expression: "object.metadata.name != 'stamp-params'"}
  variables:
  - {name: team, expression: "params.data.team"}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{metadata: Object.metadata{labels: {"team": variables.team}, annotations: {"stamped": "yes"}}}
  - patchType: JSONPatch
    jsonPatch:
      expression: >
        [JSONPatch{op: "add", path: "/metadata/annotations/" + jsonpatch.escapeKey("example.com/owner"),
                   value: variables.team + "-bot"}]
---
apiVersion: admissionregistration.k8s.io/v1alpha1
kind: MutatingAdmissionPolicyBinding
metadata: {name: stamp-binding}
spec:
  policyName: stamp.example.com
  paramRef: {name: stamp-params, namespace: default, parameterNotFoundAction: Deny}
"""


@pytest.fixture
def gated(tmp_path):
    with ServerThread(sqlite_storage(str(tmp_path / "data")), feature_gates={"MutatingAdmissionPolicy": True}) as server:
        yield Kubectl(server.url, str(tmp_path / "home"))


@pytest.fixture
def ungated(tmp_path):
    with ServerThread(sqlite_storage(str(tmp_path / "data"))) as server:
        yield Kubectl(server.url, str(tmp_path / "home"))


def configmap(name: str, **data: str) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"keep": "me"}},
                       "data": data})


def settle(kubectl: Kubectl) -> None:
    kubectl.run("get", "mutatingadmissionpolicies,mutatingadmissionpolicybindings,configmaps")


def test_mutations_with_params_and_variables_are_stored(gated):
    kubectl = gated
    kubectl.run("create", "-f", "-", input=configmap("stamp-params", team="blue"))
    kubectl.run("create", "-f", "-", input=POLICY)
    settle(kubectl)
    kubectl.run("create", "-f", "-", input=configmap("app", key="value"))
    stored = json.loads(kubectl.run("get", "configmap", "app", "-o", "json").stdout)
    assert stored["metadata"]["labels"] == {"keep": "me", "team": "blue"}
    assert stored["metadata"]["annotations"] == {"stamped": "yes", "example.com/owner": "blue-bot"}
    # the params object itself is left alone (matchConditions)
    params = json.loads(kubectl.run("get", "configmap", "stamp-params", "-o", "json").stdout)
    assert params["metadata"]["labels"] == {"keep": "me"}
    served = kubectl.run("api-resources", "--api-group", "admissionregistration.k8s.io", "-o", "name").stdout
    assert "mutatingadmissionpolicies.admissionregistration.k8s.io" in served.split()


def test_a_failing_mutation_refuses_the_write_unless_failure_policy_is_ignore(gated):
    kubectl = gated
    failing = POLICY.replace("  paramKind: {apiVersion: v1, kind: ConfigMap}\n", "").replace(
        'params.data.team', 'object.data.missing').replace(
        "  paramRef: {name: stamp-params, namespace: default, parameterNotFoundAction: Deny}\n", "")
    kubectl.run("create", "-f", "-", input=failing)
    settle(kubectl)
    refused = kubectl.run("create", "-f", "-", input=configmap("app", key="value"), check=False)
    assert refused.returncode == 1
    assert refused.stderr == (
        'Error from server (InternalError): error when creating "STDIN": Internal error occurred: '
        "MutatingAdmissionPolicy 'stamp.example.com' with binding 'stamp-binding' failed: expression "
        "'Object{metadata: Object.metadata{labels: {\"team\": variables.team}, annotations: {\"stamped\": \"yes\"}}}\n' "
        "resulted in error: no such key: team\n")
    kubectl.run("patch", "mutatingadmissionpolicy", "stamp.example.com", "--type=merge",
                "-p", '{"spec": {"failurePolicy": "Ignore"}}')
    settle(kubectl)
    kubectl.run("create", "-f", "-", input=configmap("app", key="value"))
    stored = json.loads(kubectl.run("get", "configmap", "app", "-o", "json").stdout)
    assert stored["metadata"]["labels"] == {"keep": "me"}


def test_a_mutation_that_does_not_compile_is_refused_at_create(gated):
    bad = POLICY.replace('value: variables.team + "-bot"', 'value: variables.team +')
    result = gated.run("create", "-f", "-", input=bad, check=False)
    assert result.returncode == 1
    assert "spec.mutations[1].jsonPatch.expression: Invalid value: " in result.stderr
    # the error is placed in the expression as written (not the map literal it compiles as)
    assert "compilation failed: ERROR: <input>:2:35: Syntax error: mismatched input '}'" in result.stderr
    assert result.stderr.endswith(" |            value: variables.team +}]\n | " + "." * 34 + "^\n")


def test_without_the_feature_gate_the_api_is_not_served(ungated):
    result = ungated.run("create", "-f", "-", input=POLICY, check=False)
    assert result.returncode == 1
    assert 'no matches for kind "MutatingAdmissionPolicy" in version "admissionregistration.k8s.io/v1alpha1"' \
        in result.stderr
