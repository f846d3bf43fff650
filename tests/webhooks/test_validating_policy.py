"""ValidatingAdmissionPolicy: CEL validations with params, variables,
messageExpression and the three validation actions, read from a real API
server's watch cache and called as the admission chain calls the plugin."""

from __future__ import annotations

import json

import pytest

from k8py.api.errors import StatusError
from k8py.apiserver.webhooks import build_webhook_plugins
from tests.webhooks.conftest import configmap_create, put

GROUP = "admissionregistration.k8s.io"


def policy(name: str, **spec) -> dict:
    return {"metadata": {"name": name}, "spec": {
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                                                "resources": ["configmaps"]}]}, **spec}}


def binding(name: str, policy_name: str, actions=("Deny",), **spec) -> dict:
    return {"metadata": {"name": name}, "spec": {"policyName": policy_name, "validationActions": list(actions), **spec}}


async def test_a_policy_with_params_denies_what_its_params_forbid(server):
    await put(server, "", "configmaps", {"metadata": {"name": "limits"}, "data": {"maxKeys": "2"}}, namespace="default")
    await put(server, GROUP, "validatingadmissionpolicies", policy(
        "max-keys.example.com",
        paramKind={"apiVersion": "v1", "kind": "ConfigMap"},
        variables=[{"name": "keys", "expression": "has(object.data) ? object.data.size() : 0"}],
        validations=[{"expression": "variables.keys <= int(params.data.maxKeys)",
                      "messageExpression": "'a configmap may hold ' + params.data.maxKeys + ' keys, not ' + string(variables.keys)"}]))
    await put(server, GROUP, "validatingadmissionpolicybindings", binding(
        "max-keys-binding", "max-keys.example.com", paramRef={"name": "limits", "namespace": "default"}))
    plugins = build_webhook_plugins(server.registry, server.cacher)
    try:
        await plugins.policy.validate(configmap_create(data={"a": "1", "b": "2"}))
        with pytest.raises(StatusError) as denied:
            await plugins.policy.validate(configmap_create(data={"a": "1", "b": "2", "c": "3"}))
    finally:
        await plugins.close()
    text = ("ValidatingAdmissionPolicy 'max-keys.example.com' with binding 'max-keys-binding' denied request: "
            "a configmap may hold 2 keys, not 3")
    assert denied.value.to_dict() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": f'configmaps "cm" is forbidden: {text}', "reason": "Invalid",
        "details": {"name": "cm", "kind": "configmaps", "causes": [{"message": text}]}, "code": 422}


async def test_missing_params_deny_or_allow_as_the_binding_says(server):
    await put(server, GROUP, "validatingadmissionpolicies", policy(
        "needs-params.example.com", paramKind={"apiVersion": "v1", "kind": "ConfigMap"},
        validations=[{"expression": "true"}]))
    await put(server, GROUP, "validatingadmissionpolicybindings", binding(
        "deny-binding", "needs-params.example.com", paramRef={"name": "absent", "parameterNotFoundAction": "Deny"},
        matchResources={"objectSelector": {"matchLabels": {"params": "deny"}}}))
    await put(server, GROUP, "validatingadmissionpolicybindings", binding(
        "allow-binding", "needs-params.example.com", paramRef={"name": "absent", "parameterNotFoundAction": "Allow"},
        matchResources={"objectSelector": {"matchLabels": {"params": "allow"}}}))
    plugins = build_webhook_plugins(server.registry, server.cacher)
    try:
        await plugins.policy.validate(configmap_create(labels={"params": "allow"}))
        with pytest.raises(StatusError) as denied:
            await plugins.policy.validate(configmap_create(labels={"params": "deny"}))
    finally:
        await plugins.close()
    assert denied.value.message.endswith(
        "ValidatingAdmissionPolicy 'needs-params.example.com' with binding 'deny-binding' denied request: "
        "no params found for policy binding with `Deny` parameterNotFoundAction")


async def test_warn_and_audit_actions_let_the_request_through_with_a_warning_and_an_annotation(server):
    await put(server, GROUP, "validatingadmissionpolicies", policy(
        "team-label.example.com",
        validations=[{"expression": "has(object.metadata.labels) && 'team' in object.metadata.labels",
                      "message": "every configmap needs a team label", "reason": "Forbidden"}],
        auditAnnotations=[{"key": "name", "valueExpression": "object.metadata.name"}]))
    await put(server, GROUP, "validatingadmissionpolicybindings", binding(
        "team-label-binding", "team-label.example.com", actions=("Warn", "Audit")))
    plugins = build_webhook_plugins(server.registry, server.cacher)
    try:
        attrs = configmap_create()
        await plugins.policy.validate(attrs)
        labelled = configmap_create(labels={"team": "a"})
        await plugins.policy.validate(labelled)
    finally:
        await plugins.close()
    assert attrs.warnings == ["Validation failed for ValidatingAdmissionPolicy 'team-label.example.com' with binding "
                              "'team-label-binding': every configmap needs a team label"]
    assert json.loads(attrs.annotations["validation.policy.admission.k8s.io/validation_failure"]) == [{
        "message": "every configmap needs a team label", "policy": "team-label.example.com",
        "binding": "team-label-binding", "expressionIndex": 0, "validationActions": ["Warn", "Audit"]}]
    assert attrs.annotations["team-label.example.com/name"] == "cm"
    assert labelled.warnings == [] and "validation.policy.admission.k8s.io/validation_failure" not in labelled.annotations


async def test_an_expression_that_errors_fails_closed_or_open_by_failure_policy(server):
    for name, failure in (("closed", "Fail"), ("open", "Ignore")):
        await put(server, GROUP, "validatingadmissionpolicies", policy(
            f"{name}.example.com", failurePolicy=failure,
            matchConstraints={"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                                 "resources": ["configmaps"]}],
                              "objectSelector": {"matchLabels": {"policy": name}}},
            validations=[{"expression": "object.data.missing == 'x'"}]))
        await put(server, GROUP, "validatingadmissionpolicybindings", binding(f"{name}-binding", f"{name}.example.com"))
    plugins = build_webhook_plugins(server.registry, server.cacher)
    try:
        await plugins.policy.validate(configmap_create(labels={"policy": "open"}))
        with pytest.raises(StatusError) as failed:
            await plugins.policy.validate(configmap_create(labels={"policy": "closed"}))
    finally:
        await plugins.close()
    assert failed.value.message == (
        "configmaps \"cm\" is forbidden: ValidatingAdmissionPolicy 'closed.example.com' with binding 'closed-binding' "
        "denied request: expression 'object.data.missing == 'x'' resulted in error: no such key: missing")


async def test_a_policy_only_applies_to_what_its_rules_and_the_bindings_resources_select(server):
    await put(server, GROUP, "validatingadmissionpolicies", policy(
        "deny-all.example.com", validations=[{"expression": "false", "message": "no"}],
        matchConstraints={"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                             "resources": ["configmaps"], "resourceNames": ["locked"]}]}))
    await put(server, GROUP, "validatingadmissionpolicybindings", binding("deny-all-binding", "deny-all.example.com"))
    await put(server, GROUP, "validatingadmissionpolicybindings", binding("dangling", "no-such-policy.example.com"))
    plugins = build_webhook_plugins(server.registry, server.cacher)
    try:
        await plugins.policy.validate(configmap_create("free"))
        with pytest.raises(StatusError):
            await plugins.policy.validate(configmap_create("locked"))
    finally:
        await plugins.close()
