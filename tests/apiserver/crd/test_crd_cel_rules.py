"""CRD validation rules (x-kubernetes-validations) through a real API server:
the official client and kubectl see upstream's 422s, transition rules run on
update only, and a CRD with a rule that does not compile is refused."""

from __future__ import annotations

import json

import kubernetes
import pytest

from tests.apiserver.crd.test_crd_serving import established, wait_for

GROUP = "cel.example.com"
SPEC = {
    "type": "object",
    "x-kubernetes-validations": [
        {"rule": "self.minReplicas <= self.replicas", "message": "replicas must be at least minReplicas"},
        {"rule": "self.replicas <= 10", "messageExpression": "'replicas ' + string(self.replicas) + ' is over 10'"},
        {"rule": "self.replicas >= oldSelf.replicas", "message": "replicas may not decrease"},
        {"rule": "!has(self.owner) || self.owner.matches('^[a-z]+$')", "fieldPath": ".owner",
         "reason": "FieldValueForbidden", "message": "owner must be lower case letters"},
    ],
    "properties": {
        "replicas": {"type": "integer"},
        "minReplicas": {"type": "integer"},
        "owner": {"type": "string", "maxLength": 30},
        "memory": {"type": "string", "maxLength": 20,
                   "x-kubernetes-validations": [{"rule": "quantity(self).isLessThan(quantity('1Gi'))",
                                                 "message": "memory must be under 1Gi"}]},
    },
}


def crd(rules_spec=SPEC, name="widgets") -> dict:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{name}.{GROUP}"},
        "spec": {"group": GROUP, "scope": "Namespaced",
                 "names": {"plural": name, "kind": name.capitalize()[:-1]},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": rules_spec}}}}]},
    }


@pytest.fixture
def widgets(k8s) -> kubernetes.client.CustomObjectsApi:
    ext = kubernetes.client.ApiextensionsV1Api(k8s)
    ext.create_custom_resource_definition(crd())
    wait_for(lambda: established(ext, f"widgets.{GROUP}"), what="Established")
    return kubernetes.client.CustomObjectsApi(k8s)


def widget(name: str, **spec) -> dict:
    return {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": name},
            "spec": {"replicas": 2, "minReplicas": 1, **spec}}


def refused(call, *args) -> tuple[int, dict]:
    with pytest.raises(kubernetes.client.ApiException) as err:
        call(*args)
    return err.value.status, json.loads(err.value.body)


def test_a_false_rule_is_a_422_as_upstream_writes_it(widgets) -> None:
    status, body = refused(widgets.create_namespaced_custom_object, GROUP, "v1", "default", "widgets",
                           widget("w1", minReplicas=13, replicas=12))
    assert status == 422
    assert body["message"] == (
        'Widget.cel.example.com "w1" is invalid: [spec: Invalid value: "object": replicas must be at least '
        'minReplicas, spec: Invalid value: "object": replicas 12 is over 10]')
    assert body["details"]["causes"] == [
        {"reason": "FieldValueInvalid", "message": 'Invalid value: "object": replicas must be at least minReplicas',
         "field": "spec"},
        {"reason": "FieldValueInvalid", "message": 'Invalid value: "object": replicas 12 is over 10', "field": "spec"},
    ]


def test_reason_field_path_and_library_rules(widgets) -> None:
    _, body = refused(widgets.create_namespaced_custom_object, GROUP, "v1", "default", "widgets",
                      widget("w2", owner="Bob"))
    assert body["details"]["causes"] == [
        {"reason": "FieldValueForbidden", "message": "Forbidden: owner must be lower case letters",
         "field": "spec.owner"}]
    _, body = refused(widgets.create_namespaced_custom_object, GROUP, "v1", "default", "widgets",
                      widget("w3", memory="2Gi"))
    assert body["message"] == 'Widget.cel.example.com "w3" is invalid: spec.memory: Invalid value: "string": ' \
                              'memory must be under 1Gi'
    created = widgets.create_namespaced_custom_object(GROUP, "v1", "default", "widgets",
                                                      widget("w4", memory="512Mi", owner="bob"))
    assert created["spec"]["memory"] == "512Mi"


def test_a_transition_rule_runs_on_update_only(widgets, kubectl) -> None:
    widgets.create_namespaced_custom_object(GROUP, "v1", "default", "widgets", widget("w5", replicas=3))
    status, body = refused(widgets.patch_namespaced_custom_object, GROUP, "v1", "default", "widgets", "w5",
                           {"spec": {"replicas": 2}})
    assert status == 422
    assert body["message"] == 'Widget.cel.example.com "w5" is invalid: spec: Invalid value: "object": ' \
                              'replicas may not decrease'
    widgets.patch_namespaced_custom_object(GROUP, "v1", "default", "widgets", "w5", {"spec": {"replicas": 4}})
    manifest = json.dumps(widget("w5", replicas=1))
    result = kubectl.run("apply", "-f", "-", input=manifest, check=False)
    assert result.returncode != 0
    assert 'The Widget "w5" is invalid: spec: Invalid value: "object": replicas may not decrease' in result.stderr


def test_a_crd_with_a_rule_that_does_not_compile_is_refused(k8s) -> None:
    ext = kubernetes.client.ApiextensionsV1Api(k8s)
    bad = {"type": "object", "properties": {"a": {"type": "string"}},
           "x-kubernetes-validations": [{"rule": "self.a.startsWith("}]}
    status, body = refused(ext.create_custom_resource_definition, crd(bad, name="gadgets"))
    assert status == 422
    assert body["message"] == (
        'CustomResourceDefinition.apiextensions.k8s.io "gadgets.cel.example.com" is invalid: '
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: "
        'apiextensions.ValidationRule{Rule:"self.a.startsWith(", Message:"", MessageExpression:"", '
        'Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", OptionalOldSelf:(*bool)(nil)}: '
        "compilation failed: ERROR: <input>:1:19: Syntax error: mismatched input '<EOF>' expecting "
        "{'[', '{', '(', ')', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, "
        "IDENTIFIER}\n | self.a.startsWith(\n | ..................^")


def test_a_crd_whose_rule_does_not_type_check_or_costs_too_much_is_refused(k8s) -> None:
    ext = kubernetes.client.ApiextensionsV1Api(k8s)
    bad = {"type": "object", "properties": {
        "replicas": {"type": "integer"},
        "names": {"type": "array", "items": {"type": "string"}}},
        "x-kubernetes-validations": [
            {"rule": "self.replicas > 'a'"},
            {"rule": "self.names.all(a, self.names.all(b, a.startsWith(b)))"}]}
    status, body = refused(ext.create_custom_resource_definition, crd(bad, name="typos"))
    assert status == 422
    assert body["message"] == (
        'CustomResourceDefinition.apiextensions.k8s.io "typos.cel.example.com" is invalid: ['
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: "
        'apiextensions.ValidationRule{Rule:"self.replicas > \'a\'", Message:"", MessageExpression:"", '
        'Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", OptionalOldSelf:(*bool)(nil)}: '
        "compilation failed: ERROR: <input>:1:15: found no matching overload for '_>_' applied to '(int, string)'\n"
        " | self.replicas > 'a'\n | ..............^, "
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[1].rule: Forbidden: "
        "estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding "
        "maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared), "
        "spec.versions[0].schema.openAPIV3Schema: Forbidden: x-kubernetes-validations estimated rule cost total "
        "for entire OpenAPIv3 schema exceeds budget by factor of more than 100x (try simplifying the rule, or "
        "adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)]")
    # the same CRD updated onto a good one is refused the same way
    ext.create_custom_resource_definition(crd(name="typos"))
    versions = crd(bad, name="typos")["spec"]["versions"]
    status, body = refused(ext.patch_custom_resource_definition, f"typos.{GROUP}", {"spec": {"versions": versions}})
    assert status == 422 and "found no matching overload for '_>_' applied to '(int, string)'" in body["message"]
