"""Name, label and metadata validation: upstream messages, field paths, reasons."""

from __future__ import annotations

import random

import pytest

from k8py.api.errors import Cause, Invalid
from k8py.api.names import (
    MAX_GENERATED_NAME_BASE,
    generate_name,
    is_dns1035_label,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_qualified_name,
    is_valid_label_value,
    is_valid_path_segment_name,
    name_is_dns_label,
    name_is_dns_subdomain,
    validate_annotations,
    validate_object_meta,
)

SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    r"validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
    "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


@pytest.mark.parametrize(
    ("name", "errors"),
    [
        ("example.com", []),
        ("a", []),
        ("0-9", []),
        ("a." + "b" * 63, []),
        ("Foo", [SUBDOMAIN_MSG]),
        ("-a", [SUBDOMAIN_MSG]),
        ("a-", [SUBDOMAIN_MSG]),
        ("a..b", [SUBDOMAIN_MSG]),
        ("a_b", [SUBDOMAIN_MSG]),
        ("", [SUBDOMAIN_MSG]),
        ("a\n", [SUBDOMAIN_MSG]),  # no trailing-newline loophole
        ("a" * 253, []),
        ("a" * 254, ["must be no more than 253 characters"]),
    ],
)
def test_dns1123_subdomain(name: str, errors: list[str]) -> None:
    assert is_dns1123_subdomain(name) == errors


@pytest.mark.parametrize(
    ("name", "errors"),
    [
        ("my-name", []),
        ("123-abc", []),
        ("a.b", ["must not contain dots"]),
        ("My-Name", [LABEL_MSG]),
        ("a" * 63, []),
        ("a" * 64, ["must be no more than 63 characters"]),
        ("a" * 64 + "-", ["must be no more than 63 characters", LABEL_MSG]),
    ],
)
def test_dns1123_label(name: str, errors: list[str]) -> None:
    assert is_dns1123_label(name) == errors


def test_dns1035_label_must_start_with_a_letter() -> None:
    assert is_dns1035_label("web") == []
    assert is_dns1035_label("1web") == [
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
        "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
        "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
    ]


@pytest.mark.parametrize(
    ("name", "errors"),
    [
        ("admin", []),
        ("system:admin", []),
        (".", ["may not be '.'"]),
        ("..", ["may not be '..'"]),
        ("a/b%c", ["may not contain '/'", "may not contain '%'"]),
    ],
)
def test_path_segment_names(name: str, errors: list[str]) -> None:
    assert is_valid_path_segment_name(name) == errors


@pytest.mark.parametrize(
    ("key", "starts"),
    [
        ("app", None),
        ("App.Name_1", None),
        ("example.com/app", None),
        ("/app", "prefix part must be non-empty"),
        ("Example.com/app", "prefix part a lowercase RFC 1123 subdomain"),
        ("example.com/", "name part must be non-empty"),
        ("a" * 64, "name part must be no more than 63 characters"),
        ("a/b/c", "a qualified name must consist of"),
        ("-app", "name part must consist of alphanumeric characters"),
    ],
)
def test_qualified_names(key: str, starts: str | None) -> None:
    errors = is_qualified_name(key)
    if starts is None:
        assert errors == []
    else:
        assert errors and errors[0].startswith(starts)


@pytest.mark.parametrize(
    ("value", "errors"),
    [
        ("", []),
        ("MyValue", []),
        ("my_value.1", []),
        ("-x", [LABEL_VALUE_MSG]),
        ("a b", [LABEL_VALUE_MSG]),
        ("x" * 64, ["must be no more than 63 characters"]),
    ],
)
def test_label_values(value: str, errors: list[str]) -> None:
    assert is_valid_label_value(value) == errors


def test_generate_name_prefix_may_end_with_dash_but_name_may_not() -> None:
    assert name_is_dns_subdomain("web-", True) == []
    assert name_is_dns_subdomain("web-", False) == [SUBDOMAIN_MSG]
    assert name_is_dns_label("web-", True) == []


def test_generate_name_appends_five_consonant_digits_and_truncates_base() -> None:
    rng = random.Random(7)
    name = generate_name("web-", rng=rng)
    assert name.startswith("web-") and len(name) == 9
    assert all(c in "bcdfghjklmnpqrstvwxz2456789" for c in name[4:])
    long = generate_name("x" * 100, rng=rng)
    assert MAX_GENERATED_NAME_BASE == 58
    assert len(long) == 63 and long[:58] == "x" * 58 and "x" not in long[58:]
    assert is_dns1123_label(generate_name("a" * 70)) == []


def test_annotations_over_256kib_are_too_long_and_keys_are_case_insensitive() -> None:
    assert validate_annotations({"Example.COM/Key": "v"}, "metadata.annotations") == []
    exactly = {"k": "v" * (256 * 1024 - 1)}
    assert validate_annotations(exactly, "metadata.annotations") == []
    over = {"k": "v" * (256 * 1024)}
    assert validate_annotations(over, "metadata.annotations") == [
        Cause("FieldValueTooLong", "Too long: may not be more than 262144 bytes", "metadata.annotations")
    ]
    bad = validate_annotations({"a b": "x"}, "metadata.annotations")
    assert bad[0].reason == "FieldValueInvalid" and bad[0].message.startswith('Invalid value: "a b": ')


def test_object_meta_requires_a_name() -> None:
    assert validate_object_meta({"namespace": "default"}, namespaced=True) == [
        Cause("FieldValueRequired", "Required value: name or generateName is required", "metadata.name")
    ]


def test_object_meta_invalid_name_renders_like_kubectl_shows_it() -> None:
    causes = validate_object_meta({"name": "Foo", "namespace": "default"}, namespaced=True)
    assert causes == [Cause("FieldValueInvalid", f'Invalid value: "Foo": {SUBDOMAIN_MSG}', "metadata.name")]
    error = Invalid.for_object("ConfigMap", "Foo", causes)
    assert error.message == f'ConfigMap "Foo" is invalid: metadata.name: Invalid value: "Foo": {SUBDOMAIN_MSG}'


def test_object_meta_namespace_rules_follow_scope() -> None:
    assert validate_object_meta({"name": "a"}, namespaced=True) == [
        Cause("FieldValueRequired", "Required value", "metadata.namespace")
    ]
    assert validate_object_meta({"name": "a", "namespace": "x"}, namespaced=False) == [
        Cause("FieldValueForbidden", "Forbidden: not allowed on this type", "metadata.namespace")
    ]
    assert validate_object_meta({"name": "a"}, namespaced=False) == []
    bad_ns = validate_object_meta({"name": "a", "namespace": "a.b"}, namespaced=True)
    assert bad_ns == [Cause("FieldValueInvalid", 'Invalid value: "a.b": must not contain dots', "metadata.namespace")]


def test_object_meta_uses_the_given_name_validator() -> None:
    meta = {"name": "a.b"}
    assert validate_object_meta(meta, namespaced=False) == []
    causes = validate_object_meta(meta, namespaced=False, name_validator=name_is_dns_label)
    assert causes == [Cause("FieldValueInvalid", 'Invalid value: "a.b": must not contain dots', "metadata.name")]


def test_object_meta_checks_generate_name_labels_finalizers_generation_and_owners() -> None:
    meta = {
        "name": "ok",
        "generateName": "Bad-",
        "generation": -1,
        "labels": {"app": "-web", "bad key": "v"},
        "finalizers": ["example.com/cleanup", "bad finalizer"],
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": ""}],
    }
    fields = [(c.field, c.message.split(":")[0]) for c in validate_object_meta(meta, namespaced=False)]
    assert fields == [
        ("metadata.generateName", "Invalid value"),
        ("metadata.generation", "Invalid value"),
        ("metadata.labels", "Invalid value"),
        ("metadata.labels", "Invalid value"),
        ("metadata.ownerReferences.uid", "Invalid value"),
        ("metadata.finalizers", "Invalid value"),
    ]
    causes = validate_object_meta(meta, namespaced=False)
    assert causes[1].message == "Invalid value: -1: must be greater than or equal to 0"
    assert causes[2].message == f'Invalid value: "-web": {LABEL_VALUE_MSG}'
    assert causes[4].message == 'Invalid value: "": uid must not be empty'


def test_only_one_owner_reference_may_be_the_controller() -> None:
    ref = {"apiVersion": "v1", "kind": "Pod", "uid": "u", "controller": True}
    causes = validate_object_meta(
        {"name": "a", "ownerReferences": [{**ref, "name": "a"}, {**ref, "name": "b"}]}, namespaced=False
    )
    assert len(causes) == 1
    assert causes[0].field == "metadata.ownerReferences"
    assert causes[0].message.endswith(
        'Only one reference can have Controller set to true. Found "true" in references for Pod/a and Pod/b'
    )
