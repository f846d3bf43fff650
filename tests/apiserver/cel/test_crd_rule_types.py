"""Rules type-checked against CEL types derived from their schema, at CRD time, worded as upstream's."""

import pytest

from k8py.apiserver.cel.schema_types import property_name
from k8py.apiserver.validation.cel_compile import crd_causes

PATH = "spec.versions[0].schema.openAPIV3Schema"
SPEC = {"type": "object", "properties": {
    "replicas": {"type": "integer"}, "ratio": {"type": "number"}, "name": {"type": "string", "maxLength": 10},
    "foo-bar": {"type": "string", "maxLength": 10}, "in": {"type": "integer"},
    "since": {"type": "string", "format": "date-time"}, "every": {"type": "string", "format": "duration"},
    "tags": {"type": "array", "maxItems": 4, "items": {"type": "string", "maxLength": 10}},
    "matrix": {"type": "array", "maxItems": 4, "items": {"type": "array", "maxItems": 4, "items": {"type": "integer"}}},
    "labels": {"type": "object", "maxProperties": 4, "additionalProperties": {"type": "string", "maxLength": 10}},
    "ports": {"type": "array", "maxItems": 4, "items": {"type": "object", "properties": {"port": {"type": "integer"}}}},
    "port": {"x-kubernetes-int-or-string": True},
    "template": {"type": "object", "x-kubernetes-embedded-resource": True,
                 "x-kubernetes-preserve-unknown-fields": True},
}}


def details(rule: dict) -> list[str]:
    schema = {"type": "object", "properties": {"spec": {**SPEC, "x-kubernetes-validations": [rule]}}}
    return [c.message.split("}: ", 1)[1] for c in crd_causes(schema, PATH)]


@pytest.mark.parametrize("rule", [
    "self.replicas < 1.5 && self.ratio > 1 && 2u > 1",            # cross-type numeric ordering
    "self.foo__dash__bar == 'a' && self.__in__ > 1",              # escaped property names
    "self.since < timestamp('2030-01-01T00:00:00Z') && self.every > duration('1s')",
    "self.tags.all(t, t.size() < 5) && self.matrix.all(r, r.all(c, c > 0))",
    "self.labels.all(k, self.labels[k] != 'x') && self.ports.all(p, p.port > 0)",
    "self.port == 1 || self.port == 'http'",                      # int-or-string is dyn
    "self.template.kind == 'Pod' && self.template.metadata.name != ''",
])
def test_rules_that_type_check_are_accepted(rule):
    assert details({"rule": rule}) == []


@pytest.mark.parametrize("rule, error", [
    ("self.replicas > 'a'",
     "ERROR: <input>:1:15: found no matching overload for '_>_' applied to '(int, string)'\n"
     " | self.replicas > 'a'\n | ..............^"),
    ("self.name.startsWith(1)",
     "ERROR: <input>:1:21: found no matching overload for 'startsWith' applied to 'string.(int)'\n"
     " | self.name.startsWith(1)\n | ....................^"),
    ("self.tags + 1 == self.tags",
     "ERROR: <input>:1:11: found no matching overload for '_+_' applied to '(list(string), int)'\n"
     " | self.tags + 1 == self.tags\n | ..........^"),
    ("self.name.size.x == 1",
     "ERROR: <input>:1:10: type 'string' does not support field selection\n | self.name.size.x == 1\n | .........^"),
    ("self.ports.all(p, p.prt > 0)",
     "ERROR: <input>:1:20: undefined field 'prt'\n | self.ports.all(p, p.prt > 0)\n | ...................^"),
    ("self.template.spec == 1",
     "ERROR: <input>:1:14: undefined field 'spec'\n | self.template.spec == 1\n | .............^"),
    ("self.replicas.all(x, true)",
     # at the range expression (a selection sits at its dot, as in cel-go's parser)
     "ERROR: <input>:1:5: expression of type 'int' cannot be range of a comprehension (must be list, map, or "
     "dynamic)\n | self.replicas.all(x, true)\n | ....^"),
])
def test_a_rule_that_does_not_type_check_is_refused(rule, error):
    assert details({"rule": rule}) == [f"compilation failed: {error}"]


def test_a_rule_must_be_a_bool_and_a_message_expression_a_string():
    assert details({"rule": "self.replicas"}) == ["cel expression must evaluate to a bool"]
    assert details({"rule": "self.port"}) == ["cel expression must evaluate to a bool"]  # dyn is not bool
    assert details({"rule": "true", "messageExpression": "self.replicas"}) == ["must evaluate to a string"]
    assert details({"rule": "true", "messageExpression": "'n=' + self.replicas"}) == [
        "messageExpression compilation failed: ERROR: <input>:1:6: found no matching overload for '_+_' applied to "
        "'(string, int)'\n | 'n=' + self.replicas\n | .....^"]


def test_an_optional_old_self_rule_is_checked_with_positions_in_the_rule_as_written():
    assert details({"rule": "!oldSelf.hasValue() || oldSelf.value().replicas <= self.replicas",
                    "optionalOldSelf": True}) == []
    assert details({"rule": "oldSelf.value().replicas > 'a'", "optionalOldSelf": True}) == [
        "compilation failed: ERROR: <input>:1:26: found no matching overload for '_>_' applied to '(int, string)'\n"
        " | oldSelf.value().replicas > 'a'\n | .........................^"]


def test_property_names_escape_as_upstream():
    assert property_name("foo-bar") == "foo__dash__bar"
    assert property_name("a.b/c") == "a__dot__b__slash__c"
    assert property_name("x__y") == "x__underscores__y"
    assert property_name("namespace") == "__namespace__"
    assert property_name("1st") is None
    assert property_name("a b") is None


def test_rules_see_values_as_their_types_say():
    from k8py.apiserver.validation.cel_rules import build_rule_tree

    spec = {**SPEC, "properties": {**SPEC["properties"], "data": {"type": "string", "format": "byte"}},
            "x-kubernetes-validations": [
                {"rule": "self.since < timestamp('2030-01-01T00:00:00Z')", "message": "since is too late"},
                {"rule": "self.every <= duration('1h')", "message": "every is too long"},
                {"rule": "self.foo__dash__bar != 'x' && self.__in__ >= 0", "message": "escaped names"},
                {"rule": "!has(self.data) || self.data == b'hi'", "message": "data is bytes"},
            ]}
    schema = {"type": "object", "properties": {"spec": spec}}
    assert crd_causes(schema, PATH) == []
    tree = build_rule_tree(schema)

    def failures(**fields):
        obj = {"spec": {"since": "2026-12-01T10:00:00Z", "every": "1m30s", "foo-bar": "a", "in": 1, **fields}}
        return [c.message for c in tree.validate(obj, None)]

    assert failures() == []
    assert failures(data="aGk=") == []
    assert failures(since="2031-01-01T00:00:00.5+02:00", every="2h", **{"foo-bar": "x"}, data="bm8=") == [
        'Invalid value: "object": since is too late', 'Invalid value: "object": every is too long',
        'Invalid value: "object": escaped names', 'Invalid value: "object": data is bytes']
