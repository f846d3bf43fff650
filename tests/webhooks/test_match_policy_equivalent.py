"""matchPolicy: Equivalent, end to end: a CRD served in v1 and v2, webhooks and
a policy whose rules name only v1; a write through v2 reaches them converted
to v1 (kind, resource and object), the mutating webhook's patch (to the v1
object) is stored, and with matchPolicy: Exact they are not called at all."""

from __future__ import annotations

import json

import kubernetes
import pytest

from tests.support.kube import Kubectl, official_client
from tests.support.servers import ServerThread, sqlite_storage
from tests.support.webhook_server import HTTPSServer, allow, patch_response, review_app
from tests.apiserver.crd.test_crd_serving import established, wait_for

pytestmark = pytest.mark.kubectl

GROUP = "equiv.example.com"
RULE = {"operations": ["CREATE"], "apiGroups": [GROUP], "apiVersions": ["v1"], "resources": ["gizmos"]}
SCHEMA = {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
    "type": "object", "properties": {"size": {"type": "integer"}, "color": {"type": "string"}}}}}}
CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": {"name": f"gizmos.{GROUP}"},
       "spec": {"group": GROUP, "scope": "Namespaced", "names": {"plural": "gizmos", "kind": "Gizmo"},
                "versions": [{"name": "v1", "served": True, "storage": True, "schema": SCHEMA},
                             {"name": "v2", "served": True, "storage": False, "schema": SCHEMA}]}}


@pytest.fixture
def apiserver(tmp_path):
    with ServerThread(sqlite_storage(str(tmp_path / "data"))) as server:
        yield server


@pytest.fixture
def kubectl(apiserver, tmp_path) -> Kubectl:
    kubectl = Kubectl(apiserver.url, str(tmp_path / "home"))
    kubectl.run("create", "-f", "-", input=json.dumps(CRD))
    client = official_client(apiserver.url)
    try:
        wait_for(lambda: established(kubernetes.client.ApiextensionsV1Api(client), f"gizmos.{GROUP}"),
                 what="Established")
    finally:
        client.close()
    return kubectl


def configuration(kind: str, name: str, url: str, ca_bundle: str, match_policy: str) -> str:
    return json.dumps({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": name},
                       "webhooks": [{"name": f"{name}.example.com", "clientConfig": {"url": url, "caBundle": ca_bundle},
                                     "rules": [RULE], "matchPolicy": match_policy, "sideEffects": "None",
                                     "admissionReviewVersions": ["v1"]}]})


def gizmo(name: str, version: str = "v2") -> str:
    return json.dumps({"apiVersion": f"{GROUP}/{version}", "kind": "Gizmo", "metadata": {"name": name},
                       "spec": {"size": 1}})


def settle(kubectl: Kubectl) -> None:
    kubectl.run("get", "validatingwebhookconfigurations,mutatingwebhookconfigurations,"
                       "validatingadmissionpolicies,validatingadmissionpolicybindings")


def test_a_write_through_an_equivalent_version_reaches_the_webhooks_converted(kubectl, apiserver):
    app = review_app({
        "/mutate": lambda req: patch_response([{"op": "add", "path": "/spec/color", "value": "red"}])
        if req["object"]["apiVersion"] == f"{GROUP}/v1" else allow(),
        "/validate": lambda req: allow(),
    })
    with HTTPSServer(app) as webhook:
        kubectl.run("create", "-f", "-", input=configuration(
            "MutatingWebhookConfiguration", "paint", webhook.url + "/mutate", webhook.ca_bundle, "Equivalent"))
        kubectl.run("create", "-f", "-", input=configuration(
            "ValidatingWebhookConfiguration", "look", webhook.url + "/validate", webhook.ca_bundle, "Equivalent"))
        settle(kubectl)
        kubectl.run("create", "-f", "-", input=gizmo("g1"))
        mutating, validating = webhook.requests
        for review in (mutating, validating):
            assert review["kind"] == {"group": GROUP, "version": "v1", "kind": "Gizmo"}
            assert review["resource"] == {"group": GROUP, "version": "v1", "resource": "gizmos"}
            assert review["requestKind"] == {"group": GROUP, "version": "v2", "kind": "Gizmo"}
            assert review["requestResource"] == {"group": GROUP, "version": "v2", "resource": "gizmos"}
            assert review["object"]["apiVersion"] == f"{GROUP}/v1"
        assert validating["object"]["spec"] == {"size": 1, "color": "red"}  # after the mutation, still in v1
        stored = json.loads(kubectl.run("get", f"gizmos.v2.{GROUP}", "g1", "-o", "json").stdout)
        assert (stored["apiVersion"], stored["spec"]) == (f"{GROUP}/v2", {"size": 1, "color": "red"})


def test_with_match_policy_exact_a_write_through_another_version_is_not_sent(kubectl):
    with HTTPSServer(review_app({"/validate": lambda req: allow()})) as webhook:
        kubectl.run("create", "-f", "-", input=configuration(
            "ValidatingWebhookConfiguration", "exact", webhook.url + "/validate", webhook.ca_bundle, "Exact"))
        settle(kubectl)
        kubectl.run("create", "-f", "-", input=gizmo("g2"))
        assert webhook.requests == []
        kubectl.run("create", "-f", "-", input=gizmo("g3", version="v1"))
        assert [r["name"] for r in webhook.requests] == ["g3"]


POLICY = f"""\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: v1-only.example.com}}
spec:
  matchConstraints:
    matchPolicy: Equivalent
    resourceRules: [{{apiGroups: ["{GROUP}"], apiVersions: ["v1"], operations: ["CREATE"], resources: ["gizmos"]}}]
  validations:
  - expression: "object.apiVersion == '{GROUP}/v1' && request.kind.version == 'v1' && request.requestKind.version == 'v2'"
  - expression: "object.spec.size < 5"
    messageExpression: "'size ' + string(object.spec.size) + ' seen as ' + object.apiVersion"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {{name: v1-only-binding}}
spec: {{policyName: v1-only.example.com, validationActions: [Deny]}}
"""


def test_a_policy_matched_through_an_equivalent_version_sees_the_object_in_that_version(kubectl):
    kubectl.run("create", "-f", "-", input=POLICY)
    settle(kubectl)
    kubectl.run("create", "-f", "-", input=gizmo("g4"))
    big = json.dumps({"apiVersion": f"{GROUP}/v2", "kind": "Gizmo", "metadata": {"name": "g5"}, "spec": {"size": 9}})
    denied = kubectl.run("create", "-f", "-", input=big, check=False)
    assert denied.returncode == 1
    assert denied.stderr == (
        f'The gizmos "g5" is invalid: : ValidatingAdmissionPolicy \'v1-only.example.com\' with binding '
        f"'v1-only-binding' denied request: size 9 seen as {GROUP}/v1\n")
