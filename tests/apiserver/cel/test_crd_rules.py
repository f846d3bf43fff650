"""x-kubernetes-validations on a schema: where rules run, oldSelf, messages, reasons, cost."""

import pytest

from k8py.apiserver.validation.cel_compile import crd_causes, normalize_field_path
from k8py.apiserver.validation.cel_rules import build_rule_tree

SPEC = {
    "type": "object",
    "x-kubernetes-validations": [
        {"rule": "self.minReplicas <= self.replicas", "message": "replicas must be at least minReplicas"},
        {"rule": "self.replicas <= 10", "messageExpression": "'replicas ' + string(self.replicas) + ' is over 10'"},
        {"rule": "!has(self.name) || self.name.startsWith('w-')", "reason": "FieldValueForbidden",
         "fieldPath": ".name", "message": "name must start with w-"},
        {"rule": "self.replicas >= oldSelf.replicas", "message": "replicas may not decrease"},
    ],
    "properties": {
        "replicas": {"type": "integer"},
        "minReplicas": {"type": "integer"},
        "name": {"type": "string", "maxLength": 20},
        "mode": {"type": "string", "maxLength": 10, "x-kubernetes-validations": [
            {"rule": "!oldSelf.hasValue() || oldSelf.value() == self", "optionalOldSelf": True,
             "message": "mode is immutable"}]},
        "ports": {"type": "array", "maxItems": 4, "x-kubernetes-list-type": "map",
                  "x-kubernetes-map-keys": ["name"],
                  "items": {"type": "object", "properties": {
                      "name": {"type": "string", "maxLength": 10}, "port": {"type": "integer"}},
                      "x-kubernetes-validations": [
                          {"rule": "self.port > 0", "message": "port must be positive"},
                          {"rule": "self.port == oldSelf.port", "message": "port is immutable"}]}},
        "tags": {"type": "array", "maxItems": 4, "items": {"type": "string", "maxLength": 10,
                 "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "never runs"}]}},
        "labels": {"type": "object", "maxProperties": 4, "additionalProperties": {
            "type": "string", "maxLength": 10, "x-kubernetes-validations": [{"rule": "self != 'bad'"}]}},
    },
}
SCHEMA = {"type": "object", "x-kubernetes-validations": [{"rule": "self.metadata.name.startsWith('w')"}],
          "properties": {"spec": SPEC}}
TREE = build_rule_tree(SCHEMA)


def obj(name="widget", **spec):
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name, "uid": "u"},
            "spec": {"replicas": 2, "minReplicas": 1, **spec}}


def messages(new, old=None):
    return [f"{c.field}: {c.message}" for c in TREE.validate(new, old)]


def test_a_valid_object_passes():
    assert messages(obj()) == []


def test_a_false_rule_reports_its_message_at_its_node():
    assert messages(obj(minReplicas=3)) == ['spec: Invalid value: "object": replicas must be at least minReplicas']


def test_message_expression_and_the_default_message():
    assert messages(obj(replicas=12)) == ['spec: Invalid value: "object": replicas 12 is over 10']
    assert messages(obj(name="xwidget")) == [
        '<nil>: Invalid value: "object": failed rule: self.metadata.name.startsWith(\'w\')']


def test_reason_and_field_path_shape_the_cause():
    widget = obj()
    widget["spec"]["name"] = "nope"
    causes = TREE.validate(widget, None)
    assert [(c.reason, c.field, c.message) for c in causes] == [
        ("FieldValueForbidden", "spec.name", "Forbidden: name must start with w-")]


def test_transition_rules_run_only_on_update_with_an_old_value():
    assert messages(obj(replicas=1)) == []
    assert messages(obj(replicas=1), obj(replicas=2)) == ['spec: Invalid value: "object": replicas may not decrease']
    assert messages(obj(replicas=3), obj(replicas=2)) == []


def test_optional_old_self_runs_on_create_too():
    assert messages(obj(mode="a")) == []
    assert messages(obj(mode="b"), obj(mode="a")) == ['spec.mode: Invalid value: "string": mode is immutable']
    # a new field on update: oldSelf is optional.none()
    assert messages(obj(mode="b"), obj()) == []


def test_list_map_items_correlate_by_key_and_atomic_list_items_never_do():
    old = obj(ports=[{"name": "http", "port": 80}], tags=["a"])
    assert messages(obj(ports=[{"name": "http", "port": 81}], tags=["b"]), old) == [
        'spec.ports[0]: Invalid value: "object": port is immutable']
    assert messages(obj(ports=[{"name": "https", "port": 81}]), old) == []
    assert messages(obj(ports=[{"name": "h", "port": 0}])) == [
        'spec.ports[0]: Invalid value: "object": port must be positive']


def test_map_values_get_a_key_path():
    assert messages(obj(labels={"a": "ok", "b": "bad"})) == [
        "spec.labels[b]: Invalid value: \"string\": failed rule: self != 'bad'"]


def test_errors_on_unchanged_values_are_ratcheted():
    stored = obj(minReplicas=3)  # stored before the rule existed
    assert messages(obj(minReplicas=3), stored) == []
    assert messages(obj(minReplicas=4), stored) == [
        'spec: Invalid value: "object": replicas must be at least minReplicas']


def test_an_evaluation_error_names_the_rule():
    tree = build_rule_tree({"type": "object", "properties": {"spec": {
        "type": "object", "x-kubernetes-validations": [{"rule": "self.missing == 1"}]}}})
    assert [c.message for c in tree.validate({"spec": {}}, None)] == [
        'Invalid value: "object": no such key: missing evaluating rule: self.missing == 1']


def test_a_rule_past_the_per_call_limit_stops_validation():
    tree = build_rule_tree({"type": "object", "properties": {"spec": {
        "type": "object", "x-kubernetes-validations": [
            {"rule": "self.l.all(x, self.l.all(y, x != y || true))", "message": "m"}]}}})
    causes = tree.validate({"spec": {"l": list(range(2000))}}, None)
    assert [c.message for c in causes] == [
        "Invalid value: \"object\": 'operation cancelled: actual cost limit exceeded': no further validation "
        "rules will be run due to call cost exceeds limit for rule: m"]


def test_a_schema_without_rules_has_no_tree():
    assert build_rule_tree({"type": "object", "properties": {"a": {"type": "string"}}}) is None


PATH = "spec.versions[0].schema.openAPIV3Schema"


def crd_messages(spec_rules, **spec_schema):
    schema = {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-validations": spec_rules,
                                                        **spec_schema}}}
    return [f"{c.field}: {c.message}" for c in crd_causes(schema, PATH)]


def test_a_rule_that_does_not_compile_is_refused_with_upstreams_message():
    assert crd_messages([{"rule": "self.x.all(a, "}]) == [
        f"{PATH}.properties[spec].x-kubernetes-validations[0].rule: Invalid value: "
        'apiextensions.ValidationRule{Rule:"self.x.all(a, ", Message:"", MessageExpression:"", '
        'Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", OptionalOldSelf:(*bool)(nil)}: '
        "compilation failed: ERROR: <input>:1:15: Syntax error: mismatched input '<EOF>' expecting "
        "{'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, "
        "IDENTIFIER}\n | self.x.all(a, \n | ..............^"]


@pytest.mark.parametrize("rule, message", [
    ({"rule": "1 + 1"}, "rule: Invalid value: apiextensions.ValidationRule{Rule:\"1 + 1\", Message:\"\", "
                        "MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", "
                        "OptionalOldSelf:(*bool)(nil)}: cel expression must evaluate to a bool"),
    ({"rule": ""}, "rule: Required value: rule is not specified"),
    ({"rule": "true", "reason": "Bad"}, 'reason: Unsupported value: "Bad": supported values: "FieldValueDuplicate", '
                                        '"FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"'),
    ({"rule": "true", "fieldPath": ".nope"}, 'fieldPath: Invalid value: ".nope": fieldPath must be a valid path'),
    ({"rule": "true", "message": "a\nb"}, 'message: Invalid value: "a\\nb": message must not contain line breaks'),
    ({"rule": "true", "messageExpression": "1"}, "messageExpression: Invalid value: apiextensions.ValidationRule{"
                                                 "Rule:\"true\", Message:\"\", MessageExpression:\"1\", Reason:(*api"
                                                 "extensions.FieldValueErrorReason)(nil), FieldPath:\"\", Optional"
                                                 "OldSelf:(*bool)(nil)}: must evaluate to a string"),
])
def test_rule_fields_are_checked(rule, message):
    assert crd_messages([rule], properties={"a": {"type": "string"}}) == [
        f"{PATH}.properties[spec].x-kubernetes-validations[0].{message}"]


def test_an_unbounded_rule_is_refused_by_its_estimated_cost():
    rule = {"rule": "self.items.all(x, self.items.all(y, x != y))"}
    items = {"type": "array", "items": {"type": "string"}}
    assert crd_messages([rule], properties={"items": items}) == [
        f"{PATH}.properties[spec].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget "
        "by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength "
        "where arrays, maps, and strings are declared)",
        f"{PATH}: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds "
        "budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and "
        "maxLength where arrays, maps, and strings are declared)"]
    bounded = {"type": "array", "maxItems": 10, "items": {"type": "string", "maxLength": 10}}
    assert crd_messages([rule], properties={"items": bounded}) == []


def test_old_self_on_an_uncorrelatable_item_is_refused():
    schema = {"type": "object", "properties": {"tags": {"type": "array", "maxItems": 3, "items": {
        "type": "string", "maxLength": 3, "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}}}}
    assert [c.message for c in crd_causes(schema, PATH)] == [
        'Invalid value: "self == oldSelf": oldSelf cannot be used on the uncorrelatable portion of the schema '
        f"within {PATH}.properties[tags]"]


def test_field_paths_normalize_against_the_schema():
    schema = {"type": "object", "properties": {"a": {"type": "object", "properties": {"b.c": {"type": "string"}}},
                                               "m": {"type": "object", "additionalProperties": {"type": "string"}}}}
    assert normalize_field_path(".a['b.c']", schema) == "a.b.c"
    assert normalize_field_path(".m.key", schema) == "m[key]"
    assert normalize_field_path(".a.x", schema) is None


@pytest.mark.parametrize("rule, name", [
    ("self.replicas > 0 && self.replicaz > 0", "replicaz"),
    ("has(self.nope)", "nope"),
    ("self.items.all(i, i.nam == 'x')", "nam"),
    ("self.labels.any == 'x' && self.metadata.name == 'x'", "metadata"),
])
def test_a_field_the_schema_does_not_declare_is_a_compile_error(rule, name):
    # cel-go points at the dot; for has(), at the macro's parenthesis
    column = (rule.index("(") if rule.startswith("has(") else rule.index("." + name)) + 1
    schema = {"type": "object", "properties": {
        "replicas": {"type": "integer"},
        "items": {"type": "array", "maxItems": 2, "items": {"type": "object", "properties": {
            "name": {"type": "string", "maxLength": 2}}}},
        "labels": {"type": "object", "maxProperties": 2, "additionalProperties": {"type": "string", "maxLength": 2}},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}
    causes = crd_causes({"type": "object", "properties": {"spec": {**schema, "x-kubernetes-validations": [
        {"rule": rule}]}}}, PATH)
    # (metadata is declared only at the root and in embedded resources)
    assert [c.message.split("compilation failed: ", 1)[1] for c in causes] == [
        f"ERROR: <input>:1:{column}: undefined field '{name}'\n | {rule}\n | {'.' * (column - 1)}^"]


def test_declared_root_metadata_compiles_and_unknown_fields_are_not_exposed():
    schema = {"type": "object", "x-kubernetes-validations": [
        {"rule": "self.metadata.name.startsWith('a') && has(self.spec.free) && self.kind == 'K'"}],
        "properties": {"spec": {"type": "object", "properties": {
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}
    assert crd_causes(schema, PATH) == []
    for rule, column, name in [("self.metadata.labels.size() > 0", 14, "labels"),
                               ("self.spec.free.anything == 1", 15, "anything")]:
        # upstream: "CEL declaration for objects with XPreserveUnknownFields does not expose unknown fields"
        bad = {**schema, "x-kubernetes-validations": [{"rule": rule}]}
        assert [c.message.split(": compilation failed: ")[1].splitlines()[0] for c in crd_causes(bad, PATH)] == [
            f"ERROR: <input>:1:{column}: undefined field '{name}'"]


def test_a_message_expression_is_checked_against_the_schema_and_its_cost():
    schema = {"type": "object", "properties": {"spec": {
        "type": "object", "properties": {"names": {"type": "array", "items": {"type": "string"}}},
        "x-kubernetes-validations": [
            {"rule": "true", "messageExpression": "'bad ' + self.nmes.join(',')"},
            {"rule": "true", "messageExpression": "self.names.map(a, self.names.map(b, a + b).join(',')).join(',')"},
        ]}}}
    causes = [f"{c.field}: {c.message}" for c in crd_causes(schema, PATH)]
    assert causes[0].startswith(f"{PATH}.properties[spec].x-kubernetes-validations[0].messageExpression: Invalid "
                                "value: apiextensions.ValidationRule{")
    assert causes[0].endswith("messageExpression compilation failed: ERROR: <input>:1:14: undefined field 'nmes'\n"
                              " | 'bad ' + self.nmes.join(',')\n | .............^")
    assert causes[1] == (
        f"{PATH}.properties[spec].x-kubernetes-validations[1].messageExpression: Forbidden: estimated "
        "messageExpression cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding "
        "maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)")
