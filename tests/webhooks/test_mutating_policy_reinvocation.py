"""MutatingAdmissionPolicy reinvocation (``reinvocationPolicy: IfNeeded``) through kubectl and a real API
server: a policy that judged the object runs once more when a later policy, or a mutating webhook after
the policies, changed it; a ``Never`` policy keeps what it saw; nobody runs a third time."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.support.kube import Kubectl
from tests.support.servers import ServerThread, sqlite_storage
from tests.support.webhook_server import HTTPSServer, patch_response, review_app

pytestmark = pytest.mark.kubectl

RULES = {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]}
LABELS = "has(object.metadata.labels) ? string(size(object.metadata.labels)) : '0'"
SEEN = "has(object.metadata.annotations) && ('{key}' in object.metadata.annotations) ? object.metadata.annotations['{key}'] + ',' : ''"


def counting_policy(name: str, key: str, reinvocation: str) -> list[dict]:
    """Annotation ``key``: the label counts it saw, one per run ("0,1" = ran twice)."""
    expression = (f"Object{{metadata: Object.metadata{{annotations: {{'{key}': ({SEEN.format(key=key)}) + ({LABELS})}}}}}}")
    return [{"apiVersion": "admissionregistration.k8s.io/v1alpha1", "kind": "MutatingAdmissionPolicy", "metadata": {"name": name},
             "spec": {"matchConstraints": RULES, "reinvocationPolicy": reinvocation,
                      "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": expression}}]}},
            {"apiVersion": "admissionregistration.k8s.io/v1alpha1", "kind": "MutatingAdmissionPolicyBinding",
             "metadata": {"name": name}, "spec": {"policyName": name}}]


def labelling_policy(name: str, label: str) -> list[dict]:
    expression = f"Object{{metadata: Object.metadata{{labels: {{'{label}': 'yes'}}}}}}"
    return [{"apiVersion": "admissionregistration.k8s.io/v1alpha1", "kind": "MutatingAdmissionPolicy", "metadata": {"name": name},
             "spec": {"matchConstraints": RULES,
                      "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": expression}}]}},
            {"apiVersion": "admissionregistration.k8s.io/v1alpha1", "kind": "MutatingAdmissionPolicyBinding",
             "metadata": {"name": name}, "spec": {"policyName": name}}]


@pytest.fixture
def kubectl(tmp_path):
    with ServerThread(sqlite_storage(str(tmp_path / "data")), feature_gates={"MutatingAdmissionPolicy": True}) as server:
        yield Kubectl(server.url, str(tmp_path / "home"))


def create_and_read(kubectl: Kubectl, name: str) -> dict:
    kubectl.run("get", "mutatingadmissionpolicies,mutatingadmissionpolicybindings,mutatingwebhookconfigurations")
    kubectl.run("create", "configmap", name)
    return json.loads(kubectl.run("get", "configmap", name, "-o", "json").stdout)["metadata"]


def test_an_if_needed_policy_runs_again_when_a_later_policy_changed_the_object(kubectl):
    # bindings run in name order: the two counters, then the labeller
    kubectl.run("create", "-f", "-", input=yaml.safe_dump_all(
        counting_policy("a-if-needed", "seen-if-needed", "IfNeeded") + counting_policy("b-never", "seen-never", "Never")
        + labelling_policy("c-label", "added")))
    meta = create_and_read(kubectl, "app")
    assert meta["labels"] == {"added": "yes"}
    assert meta["annotations"] == {"seen-if-needed": "0,1", "seen-never": "0"}


def test_an_if_needed_policy_runs_again_after_a_mutating_webhook_changed_the_object(kubectl):
    calls: list[dict] = []

    def add_label(req: dict) -> dict:
        calls.append(req["object"]["metadata"])
        if "by-webhook" in (req["object"]["metadata"].get("labels") or {}):
            return {"allowed": True}
        return patch_response([{"op": "add", "path": "/metadata/labels", "value": {"by-webhook": "yes"}}])

    with HTTPSServer(review_app({"/label": add_label})) as webhook:
        kubectl.run("create", "-f", "-", input=yaml.safe_dump_all(
            counting_policy("a-if-needed", "seen-if-needed", "IfNeeded") + counting_policy("b-never", "seen-never", "Never")
            + [{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": "labeller"},
                "webhooks": [{"name": "label.example.com", "clientConfig": {"url": webhook.url + "/label", "caBundle": webhook.ca_bundle},
                              "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}],
                              "sideEffects": "None", "admissionReviewVersions": ["v1"]}]}]))
        meta = create_and_read(kubectl, "app")
    assert meta["labels"] == {"by-webhook": "yes"}
    # the IfNeeded policy saw the webhook's label in the reinvocation pass; the Never one did not run again
    assert meta["annotations"] == {"seen-if-needed": "0,1", "seen-never": "0"}
    assert len(calls) == 1  # the webhook is Never: called once, though a policy changed the object after it


SIDECAR = ("Object{spec: Object.spec{containers: object.spec.containers.exists(c, c.name == 'sidecar') ? [] : "
           "[Object.spec.containers{name: 'sidecar', image: 'busybox'}]}}")


def test_the_in_tree_plugins_run_again_after_a_policy_injected_a_container(kubectl):
    """Upstream's reinvoker runs the whole mutating chain again: the container a policy added gets the
    service-account token mount and the LimitRange defaults the in-tree plugins gave the others."""
    kubectl.run("create", "-f", "-", input=yaml.safe_dump_all([
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": "default"}},
        {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "defaults", "namespace": "default"},
         "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "50m"}, "default": {"cpu": "100m"}}]}},
        {"apiVersion": "admissionregistration.k8s.io/v1alpha1", "kind": "MutatingAdmissionPolicy", "metadata": {"name": "inject"},
         "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                                          "resources": ["pods"]}]},
                  "reinvocationPolicy": "Never",
                  "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": SIDECAR}}]}},
        {"apiVersion": "admissionregistration.k8s.io/v1alpha1", "kind": "MutatingAdmissionPolicyBinding",
         "metadata": {"name": "inject"}, "spec": {"policyName": "inject"}}]))
    kubectl.run("get", "mutatingadmissionpolicies,mutatingadmissionpolicybindings,limitranges,serviceaccounts")
    kubectl.run("run", "app", "--image=busybox", "--restart=Never", "--", "sleep", "1")
    spec = json.loads(kubectl.run("get", "pod", "app", "-o", "json").stdout)["spec"]
    containers = {c["name"]: c for c in spec["containers"]}
    assert set(containers) == {"app", "sidecar"}
    for name in ("app", "sidecar"):
        mounts = [m["mountPath"] for m in containers[name].get("volumeMounts") or ()]
        assert mounts == ["/var/run/secrets/kubernetes.io/serviceaccount"], (name, mounts)
        assert containers[name]["resources"] == {"requests": {"cpu": "50m"}, "limits": {"cpu": "100m"}}, name
    assert len([v for v in spec["volumes"] if v["name"].startswith("kube-api-access-")]) == 1
