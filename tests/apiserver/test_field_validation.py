"""fieldValidation: unknown and duplicate fields, with upstream's messages."""

from __future__ import annotations

import time

import orjson
import pytest

from k8py.api.errors import BadRequest, Invalid
from k8py.apiserver.admission.field_validation import (
    check_field_validation,
    duplicate_fields,
    unknown_fields,
)

POD = "io.k8s.api.core.v1.Pod"
DEPLOYMENT = "io.k8s.api.apps.v1.Deployment"


def _pod(**container: object) -> dict:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "labels": {"any-key": "v"}, "annotations": {"a/b": "c"}},
        "spec": {"containers": [{"name": "c", "image": "nginx", **container}]},
    }


def test_a_valid_pod_has_no_unknown_fields() -> None:
    pod = _pod(ports=[{"containerPort": 80}], resources={"limits": {"cpu": "1"}})
    pod["metadata"]["managedFields"] = [{"manager": "m", "fieldsV1": {"f:spec": {"f:x": {}}}}]
    assert unknown_fields(POD, pod) == []


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda p: p["spec"]["containers"][0].update(bogusField=1), ["spec.containers[0].bogusField"]),
        (lambda p: p.update(bogus=1), ["bogus"]),
        (lambda p: p["metadata"].update(nmae="x"), ["metadata.nmae"]),
        (lambda p: p["spec"]["containers"][0].update(ports=[{"containerPort": 1, "hostport": 2}]),
         ["spec.containers[0].ports[0].hostport"]),
        (lambda p: p["spec"].update(volumes=[{"name": "v", "configMap": {"name": "x", "mode": 1}}]),
         ["spec.volumes[0].configMap.mode"]),
    ],
)
def test_unknown_fields_are_reported_with_go_decoder_paths(mutate, expected) -> None:
    pod = _pod()
    mutate(pod)
    assert unknown_fields(POD, pod) == expected


def test_unknown_fields_are_found_in_pod_templates_and_maps_allow_any_key() -> None:
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
              "spec": {"selector": {"matchLabels": {"whatever": "x"}},
                       "template": {"metadata": {"labels": {"whatever": "x"}},
                                    "spec": {"containers": [{"name": "c", "image": "i", "imagePullPolcy": "x"}]}}}}
    assert unknown_fields(DEPLOYMENT, deploy) == ["spec.template.spec.containers[0].imagePullPolcy"]


def test_kinds_without_an_upstream_schema_accept_anything() -> None:
    assert unknown_fields("", {"spec": {"anything": 1}}) == []
    assert unknown_fields("com.example.stable.v1.CronTab", {"x": 1}) == []


def test_duplicate_fields_are_found_with_their_paths() -> None:
    raw = b'{"kind":"Pod","metadata":{"name":"a","name":"b"},"spec":{"containers":[{"name":"c","image":"x","image":"y"}]}}'
    assert duplicate_fields(raw) == ["metadata.name", "spec.containers[0].image"]


def test_duplicate_top_level_field_and_spaced_colons() -> None:
    raw = b'{"kind" : "Pod", "kind" : "Pod"}'
    assert duplicate_fields(raw) == ["kind"]


def test_no_duplicates_in_strings_that_look_like_keys() -> None:
    applied = orjson.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}}).decode()
    body = {"metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": applied}},
            "spec": {"containers": [{"image": "nginx:1.2", "args": ["a\":b", "\"k\":"]}]}}
    raw = orjson.dumps(body)
    assert duplicate_fields(raw, orjson.loads(raw)) == []
    assert duplicate_fields(b"apiVersion: v1\nkind: Pod\n") == []


def test_duplicate_check_of_a_clean_body_takes_the_fast_path() -> None:
    pod = _pod(env=[{"name": f"E{i}", "value": f"v:{i}"} for i in range(2000)])
    raw = orjson.dumps(pod)
    parsed = orjson.loads(raw)
    start = time.perf_counter()
    for _ in range(20):
        assert duplicate_fields(raw, parsed) == []
    fast = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(20):
        raw_dup = raw.replace(b'"name":"p"', b'"name":"p","name":"p"', 1)
        assert duplicate_fields(raw_dup, parsed) == ["metadata.name"]
    slow = time.perf_counter() - start
    assert fast < slow


def test_strict_mode_rejects_with_upstreams_message_in_document_order() -> None:
    pod = _pod(bogusField=1)
    pod["spec"]["alsoBogus"] = True
    with pytest.raises(BadRequest) as err:
        check_field_validation("Strict", POD, pod, orjson.dumps(pod))
    assert err.value.code == 400
    assert err.value.message == (
        'Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
        'unknown field "spec.containers[0].bogusField", unknown field "spec.alsoBogus"'
    )


def test_strict_mode_reports_duplicates_for_apps_kinds_with_the_bare_version() -> None:
    raw = b'{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"replicas":1,"replicas":2}}'
    with pytest.raises(BadRequest) as err:
        check_field_validation("Strict", DEPLOYMENT, orjson.loads(raw), raw)
    assert err.value.message == (
        'Deployment in version "v1" cannot be handled as a Deployment: '
        'strict decoding error: duplicate field "spec.replicas"'
    )


def test_kind_comes_from_the_schema_when_the_body_has_none() -> None:
    with pytest.raises(BadRequest, match=r'^Pod in version "v1" cannot be handled as a Pod'):
        check_field_validation("Strict", POD, {"spec": {"x": 1}})


def test_warn_mode_returns_one_warning_per_problem_and_is_the_default() -> None:
    warnings = ['unknown field "spec.containers[0].bogusField"']
    pod = _pod(bogusField=1)
    assert check_field_validation("Warn", POD, pod, orjson.dumps(pod)) == warnings
    pod = _pod(bogusField=1)
    assert check_field_validation("", POD, pod, orjson.dumps(pod)) == warnings


def test_warn_and_ignore_drop_unknown_fields_as_typed_decoding_does() -> None:
    for mode in ("Warn", "Ignore", ""):
        pod = _pod(bogusField=1)
        check_field_validation(mode, POD, pod, orjson.dumps(pod))
        assert pod == _pod(), mode


def test_ignore_mode_and_clean_bodies_return_nothing() -> None:
    pod = _pod(bogusField=1)
    assert check_field_validation("Ignore", POD, pod, orjson.dumps(pod)) == []
    clean = _pod()
    assert check_field_validation("Strict", POD, clean, orjson.dumps(clean)) == []


def test_unknown_mode_is_rejected_like_upstream_options_validation() -> None:
    with pytest.raises(Invalid) as err:
        check_field_validation("strict", POD, _pod(), verb="patch")
    assert err.value.message == (
        'PatchOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "strict": '
        'supported values: "", "Ignore", "Strict", "Warn"'
    )
