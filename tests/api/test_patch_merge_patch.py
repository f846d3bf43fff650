"""RFC 7386 merge patch: apply, create, and the round-trip property."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from k8py.api.errors import BadRequest
from k8py.api.patch import apply_patch
from k8py.api.patch.merge_patch import apply_merge_patch, create_merge_patch


@pytest.mark.parametrize(
    ("target", "patch", "expected"),
    [  # examples from RFC 7386 appendix A
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    ],
)
def test_rfc7386_examples(target, patch, expected):
    assert apply_merge_patch(target, patch) == expected


def test_kubectl_scale_body_sets_replicas():
    out = apply_patch(
        "application/merge-patch+json", {"spec": {"replicas": 1, "x": 1}}, b'{"spec":{"replicas":3}}',
        schema_name=None,
    )
    assert out == {"spec": {"replicas": 3, "x": 1}}


def test_invalid_merge_patch_body_is_bad_request():
    for body in (b"{nope", b"5", b"null"):
        with pytest.raises(BadRequest) as info:
            apply_patch("application/merge-patch+json", {}, body, schema_name=None)
        assert info.value.message == "Invalid JSON Patch"


scalars = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=3)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=3), inner.filter(lambda v: v is not None), max_size=3),
    max_leaves=12,
)
documents = st.dictionaries(st.text(max_size=3), values.filter(lambda v: v is not None), max_size=4)


@settings(max_examples=300, deadline=None)
@given(documents, documents)
def test_applying_the_created_patch_yields_the_modified_document(a, b):
    assert apply_merge_patch(a, create_merge_patch(a, b)) == b


@settings(max_examples=100, deadline=None)
@given(documents)
def test_patch_between_equal_documents_is_empty(a):
    assert create_merge_patch(a, a) == {}
