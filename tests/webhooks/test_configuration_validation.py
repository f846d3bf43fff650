"""Webhook configurations and policies are validated as upstream validates
them: the 422 kubectl prints names each field with upstream's message, CEL
that does not compile included."""

from __future__ import annotations

import pytest

from tests.support.kube import Kubectl
from tests.support.servers import ServerThread, sqlite_storage

pytestmark = pytest.mark.kubectl


@pytest.fixture
def kubectl(tmp_path):
    with ServerThread(sqlite_storage(str(tmp_path / "data"))) as server:
        yield Kubectl(server.url, str(tmp_path / "home"))


BAD_WEBHOOK = """\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: bad}
webhooks:
- name: bad
  clientConfig: {url: "http://127.0.0.1:9443/validate"}
  sideEffects: Unknown
  timeoutSeconds: 31
  admissionReviewVersions: [v2]
  matchConditions:
  - {name: broken, expression: "object."}
"""


def test_a_bad_webhook_configuration_is_refused_field_by_field(kubectl):
    refused = kubectl.run("create", "-f", "-", input=BAD_WEBHOOK, check=False)
    assert refused.returncode == 1
    assert refused.stderr == (
        'The ValidatingWebhookConfiguration "bad" is invalid: \n'
        '* webhooks[0].name: Invalid value: "bad": should be a domain with at least three segments separated by dots\n'
        '* webhooks[0].sideEffects: Unsupported value: "Unknown": supported values: "None", "NoneOnDryRun"\n'
        "* webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds\n"
        "* webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme\n"
        '* webhooks[0].matchConditions[0].expression: Invalid value: "object.": compilation failed: '
        "ERROR: <input>:1:8: Syntax error: no viable alternative at input '.'\n"
        " | object.\n"
        " | .......^\n"
        '* webhooks[0].admissionReviewVersions: Invalid value: []string{"v2"}: must include at least one of v1, v1beta1\n')


def test_defaults_are_filled_as_upstream(kubectl):
    kubectl.run("create", "-f", "-", input=BAD_WEBHOOK.replace("name: bad\n  clientConfig", "name: good.example.com\n  clientConfig")
                .replace("http://", "https://").replace("Unknown", "None").replace("31", "5").replace("[v2]", "[v1]")
                .replace('"object."', '"true"').replace("{name: bad}", "{name: good}"))
    import json
    (hook,) = json.loads(kubectl.run("get", "validatingwebhookconfiguration", "good", "-o", "json").stdout)["webhooks"]
    assert (hook["failurePolicy"], hook["matchPolicy"], hook["namespaceSelector"], hook["objectSelector"], hook["timeoutSeconds"]) == (
        "Fail", "Equivalent", {}, {}, 5)


def test_a_policy_whose_cel_does_not_compile_is_refused(kubectl):
    refused = kubectl.run("create", "-f", "-", check=False, input="""\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: broken.example.com}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
  validations:
  - expression: "1 < 'a'"
""")
    assert refused.returncode == 1
    assert refused.stderr.startswith(
        'The ValidatingAdmissionPolicy "broken.example.com" is invalid: spec.validations[0].expression: '
        "Invalid value: \"1 < 'a'\": compilation failed: ERROR: <input>:1:3: found no matching overload for '_<_' applied to '(int, string)'")
