"""RFC 6902 JSON patch with evanphx/json-patch v4 semantics and upstream errors."""

import pytest

from k8py.api.errors import BadRequest, Invalid, UnsupportedMediaType
from k8py.api.patch import apply_patch
from k8py.api.patch.json_patch import apply_json_patch
from k8py.api.patch.patch_errors import GENERIC_UNPROCESSABLE

POD = {
    "metadata": {"name": "p", "labels": {"a/b": "x", "t~n": "y"}},
    "spec": {"containers": [{"name": "c", "image": "i", "args": ["1", "2"]}]},
}


@pytest.mark.parametrize(
    ("ops", "check"),
    [
        ([{"op": "add", "path": "/metadata/labels/new", "value": "v"}], lambda d: d["metadata"]["labels"]["new"] == "v"),
        ([{"op": "add", "path": "/spec/containers/0/args/-", "value": "3"}], lambda d: d["spec"]["containers"][0]["args"] == ["1", "2", "3"]),
        ([{"op": "add", "path": "/spec/containers/0/args/0", "value": "0"}], lambda d: d["spec"]["containers"][0]["args"] == ["0", "1", "2"]),
        ([{"op": "add", "path": "/spec/containers/0/args/-2", "value": "x"}], lambda d: d["spec"]["containers"][0]["args"] == ["1", "x", "2"]),
        ([{"op": "remove", "path": "/metadata/labels/a~1b"}], lambda d: "a/b" not in d["metadata"]["labels"]),
        ([{"op": "remove", "path": "/metadata/labels/t~0n"}], lambda d: "t~n" not in d["metadata"]["labels"]),
        ([{"op": "replace", "path": "/spec/containers/0/image", "value": "j"}], lambda d: d["spec"]["containers"][0]["image"] == "j"),
        ([{"op": "move", "from": "/metadata/labels/t~0n", "path": "/metadata/labels/moved"}], lambda d: d["metadata"]["labels"] == {"a/b": "x", "moved": "y"}),
        ([{"op": "copy", "from": "/spec/containers/0", "path": "/spec/containers/-"}], lambda d: len(d["spec"]["containers"]) == 2),
        ([{"op": "test", "path": "/metadata/name", "value": "p"}, {"op": "replace", "path": "/metadata/name", "value": "q"}], lambda d: d["metadata"]["name"] == "q"),
        ([{"op": "test", "path": "/metadata/missing", "value": None}], lambda d: d == POD),
    ],
)
def test_operations_apply_as_rfc6902_says(ops, check):
    assert check(apply_json_patch(POD, ops))


def test_input_document_is_not_mutated():
    apply_json_patch(POD, [{"op": "remove", "path": "/spec/containers/0/args/0"}])
    assert POD["spec"]["containers"][0]["args"] == ["1", "2"]


def test_failed_test_operation_is_invalid_with_upstream_message():
    with pytest.raises(Invalid) as info:
        apply_json_patch(POD, [{"op": "test", "path": "/metadata/name", "value": "other"}])
    status = info.value.to_dict()
    assert status["code"] == 422 and status["reason"] == "Invalid"
    assert status["message"] == GENERIC_UNPROCESSABLE
    assert status["details"]["causes"][0]["message"] == "testing value /metadata/name failed: test failed"


def test_test_operation_tells_booleans_from_numbers():
    with pytest.raises(Invalid):
        apply_json_patch({"a": 1}, [{"op": "test", "path": "/a", "value": True}])


def test_replace_under_missing_parent_reports_the_missing_path():
    with pytest.raises(Invalid) as info:
        apply_json_patch(POD, [{"op": "replace", "path": "/spec/nothing/here", "value": 1}])
    assert info.value.causes[0].message == (
        "replace operation does not apply: doc is missing path: /spec/nothing/here: missing value"
    )


def test_replace_of_missing_array_index_reports_missing_key():
    with pytest.raises(Invalid) as info:
        apply_json_patch(POD, [{"op": "replace", "path": "/spec/containers/5", "value": {}}])
    assert "doc is missing key: /spec/containers/5" in info.value.causes[0].message


def test_replace_of_missing_object_member_adds_it_like_v4():
    out = apply_json_patch(POD, [{"op": "replace", "path": "/metadata/labels/zzz", "value": "1"}])
    assert out["metadata"]["labels"]["zzz"] == "1"


def test_remove_of_missing_key_fails():
    with pytest.raises(Invalid) as info:
        apply_json_patch(POD, [{"op": "remove", "path": "/metadata/nope"}])
    assert info.value.causes[0].message == (
        "error in remove for path: '/metadata/nope': Unable to remove nonexistent key: nope: missing value"
    )


def test_add_past_the_end_of_an_array_fails():
    with pytest.raises(Invalid):
        apply_json_patch(POD, [{"op": "add", "path": "/spec/containers/0/args/9", "value": "x"}])


def test_unknown_operation_fails():
    with pytest.raises(Invalid) as info:
        apply_json_patch(POD, [{"op": "frobnicate", "path": "/a"}])
    assert info.value.causes[0].message == "Unexpected kind: frobnicate"


def test_body_that_is_an_object_is_a_bad_request():
    with pytest.raises(BadRequest) as info:
        apply_patch("application/json-patch+json", POD, b'{"op":"add"}', schema_name=None)
    assert info.value.message == "json: cannot unmarshal object into Go value of type jsonpatch.Patch"


def test_body_that_is_not_json_is_a_bad_request():
    with pytest.raises(BadRequest) as info:
        apply_patch("application/json-patch+json", POD, b"[{oops", schema_name=None)
    assert "invalid character" in info.value.message


def test_unknown_content_type_is_415_listing_accepted_types():
    with pytest.raises(UnsupportedMediaType) as info:
        apply_patch("text/plain", POD, b"{}", schema_name=None)
    assert info.value.code == 415
    assert info.value.message == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, "
        "application/strategic-merge-patch+json, application/apply-patch+yaml"
    )


def test_strategic_merge_can_be_refused_for_custom_resources():
    with pytest.raises(UnsupportedMediaType):
        apply_patch("application/strategic-merge-patch+json", {}, b"{}", schema_name=None, allow_strategic=False)


def test_content_type_parameters_are_ignored():
    out = apply_patch(
        "application/json-patch+json; charset=utf-8", POD,
        b'[{"op":"replace","path":"/metadata/name","value":"z"}]', schema_name=None,
    )
    assert out["metadata"]["name"] == "z"
