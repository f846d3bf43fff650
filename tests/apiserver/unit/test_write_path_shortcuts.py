"""The write path's shortcuts give exactly what the long way gives.

Each cheaper form of a create's work (remembered label checks, UIDs cut from
a hex pool, the unknown-field fast check, precomputed definition keys) is
compared here with the computation it replaces, on valid and invalid input.
"""

from __future__ import annotations

import copy
import dataclasses
import uuid

import orjson
import pytest

from k8py.api import names
from k8py.apiserver.admission import field_validation as fv
from k8py.apiserver.registry import ResourceDefinition
from k8py.apiserver.store.object_meta import _UidSource

POD = "io.k8s.api.core.v1.Pod"


def _pod() -> dict:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-1", "namespace": "ns", "labels": {"app": "web", "tier": "a.b_c-d"},
                     "annotations": {"example.com/owner": "me", "note": "x" * 50}},
        "spec": {
            "containers": [{
                "name": "main", "image": "img:1", "args": ["--a", "--b"],
                "ports": [{"name": "http", "containerPort": 8080}],
                "env": [{"name": f"V{i}", "value": str(i)} for i in range(3)],
                "resources": {"requests": {"cpu": "100m"}, "limits": {"memory": "1Gi"}},
                "readinessProbe": {"httpGet": {"path": "/", "port": 8080}},
                "volumeMounts": [{"name": "c", "mountPath": "/etc/c"}],
            }],
            "volumes": [{"name": "c", "configMap": {"name": "cm", "items": [{"key": "k", "path": "p"}]}}],
            "nodeSelector": {"disk": "ssd"},
        },
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def _slow(obj: dict, prune: bool = False) -> tuple[list[str], int]:
    out: list[str] = []
    count = fv._walk(fv._compile(fv._resolved(POD)), obj, "", out, prune)
    return out, count


def test_fast_unknown_check_counts_as_the_walk_on_a_clean_pod() -> None:
    pod = _pod()
    assert fv._unknown_and_count(POD, pod) == _slow(pod)
    assert fv._unknown_and_count(POD, pod)[0] == []


@pytest.mark.parametrize("mutate", [
    lambda p: p["spec"]["containers"][0].__setitem__("bogus", {"deep": [1, {"x": 2}]}),
    lambda p: p["spec"].__setitem__("typo", 1),
    lambda p: p["metadata"].__setitem__("nope", "x"),
    lambda p: p["spec"]["volumes"][0]["configMap"]["items"][0].__setitem__("extra", [{"a": 1}]),
    lambda p: p.__setitem__("top", {"a": {"b": 1}}),
    lambda p: p["status"]["conditions"][0].__setitem__("weird", True),
])
def test_unknown_fields_reported_in_document_order_and_pruned_as_before(mutate) -> None:
    pod = _pod()
    mutate(pod)
    pod["spec"]["alsoBad"] = [1, 2]  # a second one, later in the document
    expected = _slow(copy.deepcopy(pod))
    assert expected[0], "the case must hold an unknown field"
    assert fv._unknown_and_count(POD, copy.deepcopy(pod)) == expected
    pruned_fast, pruned_slow = copy.deepcopy(pod), copy.deepcopy(pod)
    assert fv._unknown_and_count(POD, pruned_fast, prune=True) == _slow(pruned_slow, prune=True)
    assert pruned_fast == pruned_slow


def test_a_scalar_field_holding_an_object_is_counted_as_before() -> None:
    pod = _pod()
    pod["spec"]["containers"][0]["image"] = {"not": "a string"}  # wrong type: validation's business
    pod["metadata"]["labels"]["odd"] = {"a": 1}
    assert fv._unknown_and_count(POD, pod) == _slow(pod)


def test_duplicate_detection_still_sees_duplicates() -> None:
    raw = orjson.dumps(_pod()).replace(b'"name":"main"', b'"name":"main","name":"again"')
    problems = fv.check_field_validation("Warn", POD, orjson.loads(raw), raw)
    assert problems == ['duplicate field "spec.containers[0].name"']


def test_remembered_label_checks_never_hide_an_invalid_label() -> None:
    good = {"app": "web", "example.com/tier": "a-b"}
    assert names.validate_labels(good, "metadata.labels") == []
    assert names.validate_labels(good, "metadata.labels") == []  # now from the remembered passes
    bad = names.validate_labels({"app": "-bad-", "example.com/tier": "a-b", "Bad/Key": "v"}, "metadata.labels")
    assert [c.field for c in bad] == ["metadata.labels", "metadata.labels"]
    assert '"-bad-"' in bad[0].message and '"Bad/Key"' in bad[1].message
    # a value is remembered as a value, not as a key
    assert names.validate_labels({"x": "v_1"}, "f") == []
    assert names.validate_labels({"v_1/x": "y"}, "f") != []
    assert names.validate_labels({"k": 3}, "f")[0].message.endswith("must be a string")


def test_remembered_annotation_keys_still_count_the_size_limit() -> None:
    ann = {"example.com/a": "x"}
    assert names.validate_annotations(ann, "metadata.annotations") == []
    big = {"example.com/a": "x" * names.TOTAL_ANNOTATION_SIZE_LIMIT}
    causes = names.validate_annotations(big, "metadata.annotations")
    assert len(causes) == 1 and causes[0].reason == "FieldValueTooLong"
    assert names.validate_annotations({"bad key": "v"}, "metadata.annotations") != []


def test_remembered_passes_are_bounded() -> None:
    for i in range(names._PASSED_LIMIT + 10):
        names.validate_labels({f"k{i}": f"v{i}"}, "f")
    assert len(names._GOOD_QUALIFIED) <= names._PASSED_LIMIT
    assert len(names._GOOD_LABEL_VALUES) <= names._PASSED_LIMIT


def test_go_byte_length_of_non_ascii() -> None:
    assert names._blen("abc") == 3
    assert names._blen("é") == 2
    assert names.is_valid_label_value("é" * 32) != []  # 64 bytes: too long, as Go counts


def test_uids_are_random_version_4_rfc4122() -> None:
    source = _UidSource()
    seen = set()
    for _ in range(2000):  # crosses a pool refill
        uid = source.new()
        parsed = uuid.UUID(uid)
        assert str(parsed) == uid and parsed.version == 4 and parsed.variant == uuid.RFC_4122
        seen.add(uid)
    assert len(seen) == 2000


def test_definition_keys_follow_replace() -> None:
    d = ResourceDefinition("apps", "v1", "Deployment", "deployments", "deployment", True)
    assert (d.api_version, d.key_prefix, d.key("ns", "a")) == ("apps/v1", "/registry/deployments/", "/registry/deployments/ns/a")
    e = dataclasses.replace(d, group="", storage_resource="example.com/things", namespaced=False)
    assert (e.api_version, e.key("ns", "a"), e.namespace_prefix("ns")) == ("v1", "/registry/example.com/things/a", "/registry/example.com/things/")
    assert d == dataclasses.replace(d)


def _reference_fill(api_version: str, kind: str, obj: dict) -> None:
    """fill_go_fields as it was written before the always/present split: every row in order."""
    from importlib import resources

    raw = orjson.loads(resources.files("k8py.api").joinpath("go_shapes.json").read_bytes())
    types, kinds = raw["types"], raw["kinds"]

    def fill(type_name: str, o: dict) -> None:
        for name, mode, arg in types.get(type_name, ()):
            value = o.get(name)
            if mode == "zero":
                if value is None and (arg is not None or name not in o):
                    o[name] = arg
            elif mode == "struct":
                if value is None:
                    value = o[name] = {}
                if type(value) is dict:
                    fill(arg, value)
            elif value is None:
                continue
            elif mode == "ptr":
                if type(value) is dict:
                    fill(arg, value)
            elif mode == "list":
                if type(value) is list:
                    for item in value:
                        if type(item) is dict:
                            fill(arg, item)
            elif type(value) is dict:
                for item in value.values():
                    if type(item) is dict:
                        fill(arg, item)

    name = kinds.get(f"{api_version}/{kind}")
    if name is not None:
        fill(name, obj)


def test_go_fields_filled_exactly_as_row_by_row() -> None:
    from k8py.api.go_shape import fill_go_fields, shaped_kinds

    pod = _pod()
    pod["spec"]["initContainers"] = [copy.deepcopy(pod["spec"]["containers"][0])]
    pod["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"a": "b"}}, "topologyKey": "zone"}]}}
    pod["spec"]["containers"][0]["env"].append({"name": "F", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}})
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                  "spec": {"selector": {"matchLabels": {"a": "b"}},
                           "template": {"metadata": {"labels": {"a": "b"}}, "spec": copy.deepcopy(pod["spec"])}}}
    cases = [("v1", "Pod", pod), ("apps/v1", "Deployment", deployment)]
    cases += [(gv_kind.rsplit("/", 1)[0], gv_kind.rsplit("/", 1)[1], {}) for gv_kind in shaped_kinds()]
    for api_version, kind, obj in cases:
        ours, reference = copy.deepcopy(obj), copy.deepcopy(obj)
        fill_go_fields(api_version, kind, ours)
        _reference_fill(api_version, kind, reference)
        assert orjson.dumps(ours) == orjson.dumps(reference), (api_version, kind)


def test_json_equal_keeps_json_kinds_apart() -> None:
    from k8py.api.patch.json_values import json_equal, json_kind

    class Sub(dict):
        pass

    assert json_equal("a", "a") and not json_equal("a", "b")
    assert not json_equal(True, 1) and not json_equal(1, True) and not json_equal(0, False)
    assert json_equal(1, 1.0) and json_equal(2.0, 2)
    assert json_equal(None, None) and not json_equal(None, 0) and not json_equal("", None)
    assert json_equal({"a": [1, {"b": True}]}, {"a": [1.0, {"b": True}]})
    assert not json_equal({"a": [1, {"b": True}]}, {"a": [1, {"b": 1}]})
    assert json_equal(Sub(a=1), {"a": 1}) and not json_equal(Sub(a=1), {"a": "1"})
    assert not json_equal([1], [1, 2]) and not json_equal({"a": 1}, {"b": 1})
    assert [json_kind(v) for v in ("s", {}, [], None, True, 1, 1.5, Sub())] == [
        "string", "map", "list", "null", "bool", "number", "number", "map"]
    with pytest.raises(TypeError):
        json_equal((1,), (1,))
