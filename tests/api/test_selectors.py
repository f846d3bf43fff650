"""Label and field selectors against upstream apimachinery examples."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from k8py.api.errors import BadRequest
from k8py.api.selectors import (
    FieldSelector,
    LabelSelector,
    escape_field_value,
    label_selector_from_dict,
    parse_field_selector,
    parse_label_selector,
)

WEB = {"app": "web", "tier": "front", "replicas": "3"}


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    [
        ("", WEB, True),
        ("app=web", WEB, True),
        ("app==web", WEB, True),
        ("app=db", WEB, False),
        ("app!=db", WEB, True),
        ("app!=web", WEB, False),
        ("missing!=x", WEB, True),  # != matches objects without the key
        ("missing=x", WEB, False),
        ("app in (web,db)", WEB, True),
        ("app in (db)", WEB, False),
        ("missing in (x)", WEB, False),
        ("app notin (db,cache)", WEB, True),
        ("app notin (web)", WEB, False),
        ("missing notin (x)", WEB, True),  # notin matches objects without the key
        ("app", WEB, True),
        ("missing", WEB, False),
        ("!missing", WEB, True),
        ("!app", WEB, False),
        ("app=web,tier=front", WEB, True),
        ("app=web,tier=back", WEB, False),
        ("  app = web ,  tier  in ( front , back )  ", WEB, True),
        ("replicas>2", WEB, True),
        ("replicas<3", WEB, False),
        ("app>1", WEB, False),  # non-integer label value never matches gt/lt
        ("missing<10", WEB, False),
        ("app=", {"app": ""}, True),
        ("app in (web,)", {"app": ""}, True),
        ("x in (in,notin)", {"x": "notin"}, True),
        ("in=notin", {"in": "notin"}, True),
        ("example.com/app=web", {"example.com/app": "web"}, True),
        ("app=web", None, False),
        ("!app", None, True),
    ],
)
def test_label_selector_matches_like_upstream(text: str, labels: dict | None, expected: bool) -> None:
    assert parse_label_selector(text).matches(labels) is expected


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("", ""),
        ("x=a,a=b", "a=b,x=a"),
        ("a==b", "a==b"),
        ("b notin (z,x,x), a in (c,b)", "a in (b,c),b notin (x,z)"),
        ("a in (x,,y)", "a in (,x,y)"),
        ("a in ()", "a in ()"),
        ("!b,a", "a,!b"),
        ("a>1,b<2", "a>1,b<2"),
        ("a=", "a="),
    ],
)
def test_label_selector_string_form_is_canonical(text: str, canonical: str) -> None:
    selector = parse_label_selector(text)
    assert selector.to_string() == canonical
    assert parse_label_selector(canonical).to_string() == canonical


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
        ("a=b c", "found 'c', expected: ',' or 'end of string'"),
        ("a in b", "unable to parse requirement: found 'b' expected: '('"),
        ("a in (b c)", "unable to parse requirement: found 'c', expected: ',' or ')'"),
        ("a in (b,", "unable to parse requirement: found '', expected: ',', or identifier"),
        ("a,", "found '', expected: identifier after ','"),
        (",a", "found ',', expected: !, identifier, or 'end of string'"),
        ("!", "unable to parse requirement: found '', expected: identifier"),
        ("!a=b", "found '=', expected: ',' or 'end of string'"),
        ("a=b=c", "found '=', expected: ',' or 'end of string'"),
        ("a>x", "unable to parse requirement: values[0]: Invalid value: \"x\": "
                "for 'Gt', 'Lt' operators, the value must be an integer"),
    ],
)
def test_bad_label_selector_syntax_is_a_bad_request_with_upstream_wording(
    text: str, message: str
) -> None:
    with pytest.raises(BadRequest) as info:
        parse_label_selector(text)
    assert info.value.message == message
    assert info.value.code == 400


def test_invalid_label_key_reports_nil_path_like_upstream() -> None:
    with pytest.raises(BadRequest) as info:
        parse_label_selector("app:monolith")
    assert info.value.message.startswith(
        'unable to parse requirement: <nil>: Invalid value: "app:monolith": name part must consist '
        "of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
        "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is"
    )


def test_invalid_label_value_names_value_path_and_key() -> None:
    with pytest.raises(BadRequest) as info:
        parse_label_selector("app=-web")
    assert info.value.message.startswith(
        'unable to parse requirement: values[0][app]: Invalid value: "-web": a valid label must be'
    )


def test_too_long_label_value_is_rejected() -> None:
    with pytest.raises(BadRequest, match="must be no more than 63 characters"):
        parse_label_selector("a=" + "x" * 64)


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        ("app=web", "app", "web"),
        ("app==web,tier=x", "app", "web"),
        ("app in (web)", "app", "web"),
        ("app in (web,db)", "app", None),
        ("app!=web", "app", None),
        ("app", "app", None),
        ("tier=x", "app", None),
    ],
)
def test_equality_value_is_set_only_when_key_is_pinned(text: str, key: str, value: str | None) -> None:
    assert parse_label_selector(text).equality_value(key) == value


def test_empty_selector_is_empty_and_matches_everything() -> None:
    selector = parse_label_selector("")
    assert selector.empty
    assert selector.matches({}) and selector.matches(None)


def test_dict_selector_none_matches_nothing_and_empty_matches_everything() -> None:
    nothing = label_selector_from_dict(None)
    assert not nothing.empty and not nothing.matches({}) and not nothing.matches(WEB)
    everything = label_selector_from_dict({})
    assert everything.empty and everything.matches(WEB)
    assert label_selector_from_dict({"matchLabels": {}, "matchExpressions": []}).empty


def test_dict_selector_combines_match_labels_and_expressions() -> None:
    selector = label_selector_from_dict(
        {
            "matchLabels": {"tier": "front", "app": "web"},
            "matchExpressions": [
                {"key": "env", "operator": "NotIn", "values": ["prod", "dev"]},
                {"key": "replicas", "operator": "Exists"},
                {"key": "canary", "operator": "DoesNotExist"},
                {"key": "app", "operator": "In", "values": ["web", "api"]},
            ],
        }
    )
    assert selector.to_string() == "app=web,app in (api,web),!canary,env notin (dev,prod),replicas,tier=front"
    assert selector.matches(WEB)
    assert not selector.matches({**WEB, "env": "prod"})
    assert not selector.matches({**WEB, "canary": "1"})
    assert selector.equality_value("app") == "web"
    assert parse_label_selector(selector.to_string()) == selector


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
         '"Gt" is not a valid label selector operator'),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]},
         "values: Invalid value: []string(nil): for 'in', 'notin' operators, values set can't be empty"),
        ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
         "values: Invalid value: []string{\"x\"}: values set must be empty for exists and does not exist"),
        ({"matchLabels": {"a b": "c"}}, 'key: Invalid value: "a b": name part must consist'),
    ],
)
def test_bad_dict_selector_is_a_bad_request(selector: dict, message: str) -> None:
    with pytest.raises(BadRequest) as info:
        label_selector_from_dict(selector)
    assert info.value.message.startswith(message)


def test_label_selector_is_hashable_value() -> None:
    assert {parse_label_selector("a=b,c"), parse_label_selector("c, a=b")} == {
        LabelSelector.of(parse_label_selector("a=b,c").requirements)
    }


# --- field selectors -------------------------------------------------------------

POD = {"metadata.name": "web-1", "metadata.namespace": "default", "spec.nodeName": "",
       "status.phase": "Running"}


def _get(field: str) -> str | None:
    return POD.get(field)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", True),
        ("metadata.name=web-1", True),
        ("metadata.name==web-1", True),
        ("metadata.name!=web-1", False),
        ("metadata.name=web-2", False),
        ("spec.nodeName=", True),  # unscheduled pods
        ("spec.nodeName!=", False),
        ("status.phase!=Failed,status.phase!=Succeeded", True),
        ("metadata.name=web-1,metadata.namespace=kube-system", False),
    ],
)
def test_field_selector_matches(text: str, expected: bool) -> None:
    assert parse_field_selector(text).matches(_get) is expected


def test_field_selector_unescapes_values_and_round_trips() -> None:
    selector = parse_field_selector(r"metadata.name=a\,b\=c\\d")
    assert selector.terms[0].value == "a,b=c\\d"
    assert selector.to_string() == r"metadata.name=a\,b\=c\\d"
    assert escape_field_value("x,y=z\\") == r"x\,y\=z\\"
    assert selector.matches(lambda f: "a,b=c\\d")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("metadata.name", "invalid selector: 'metadata.name'; can't understand 'metadata.name'"),
        ("a=b,c", "invalid selector: 'a=b,c'; can't understand 'c'"),
        (r"a=b\x", r"invalid field selector: invalid escape sequence: \x"),
        ("a=b\\", "invalid field selector: invalid escape sequence: \\"),
        ("a=b=c", "invalid field selector: unescaped character in value: 61"),
    ],
)
def test_bad_field_selector_is_a_bad_request(text: str, message: str) -> None:
    with pytest.raises(BadRequest) as info:
        parse_field_selector(text)
    assert info.value.message == message


def test_field_selector_sorts_terms_and_lists_fields_once() -> None:
    selector = parse_field_selector("status.phase!=Failed,metadata.name=x,status.phase!=Succeeded")
    assert selector.to_string() == "metadata.name=x,status.phase!=Failed,status.phase!=Succeeded"
    assert selector.fields == ("metadata.name", "status.phase")


def test_field_selector_first_operator_splits_and_spaces_are_kept() -> None:
    selector = parse_field_selector("a!=b")
    assert (selector.terms[0].field, selector.terms[0].negated) == ("a", True)
    with pytest.raises(BadRequest, match="unescaped character in value: 61"):
        parse_field_selector("a===b")  # "==" splits, "=b" is left unescaped
    spaced = parse_field_selector("a = b")
    assert (spaced.terms[0].field, spaced.terms[0].value) == ("a ", " b")


def test_field_equality_value_ignores_negated_terms() -> None:
    selector = parse_field_selector("spec.nodeName!=x,metadata.name=web-1")
    assert selector.equality_value("metadata.name") == "web-1"
    assert selector.equality_value("spec.nodeName") is None
    assert parse_field_selector("spec.nodeName==n1").equality_value("spec.nodeName") == "n1"


def test_unsupported_field_raises_field_label_not_supported() -> None:
    with pytest.raises(BadRequest, match="^field label not supported: spec.bogus$"):
        parse_field_selector("spec.bogus=x").matches(_get)


def test_empty_field_selector_is_empty() -> None:
    assert parse_field_selector("").empty and FieldSelector().matches(lambda f: None)


# --- properties -------------------------------------------------------------------

_names = st.from_regex(r"[a-z0-9]([a-z0-9._-]{0,8}[a-z0-9])?", fullmatch=True)
_prefixes = st.from_regex(r"[a-z]{1,5}\.io", fullmatch=True)
_keys = st.one_of(_names, st.builds(lambda p, n: f"{p}/{n}", _prefixes, _names))
_label_values = st.one_of(st.just(""), _names)
_api_selectors = st.fixed_dictionaries(
    {},
    optional={
        "matchLabels": st.dictionaries(_keys, _label_values, max_size=3),
        "matchExpressions": st.lists(
            st.one_of(
                st.fixed_dictionaries(
                    {"key": _keys, "operator": st.sampled_from(["In", "NotIn"]),
                     "values": st.lists(_label_values, min_size=1, max_size=3)}
                ),
                st.fixed_dictionaries({"key": _keys, "operator": st.sampled_from(["Exists", "DoesNotExist"])}),
            ),
            max_size=3,
        ),
    },
)


@settings(max_examples=100, deadline=None)
@given(selector=_api_selectors, labels=st.dictionaries(_keys, _label_values, max_size=4))
def test_string_form_parses_back_to_an_equal_selector_that_matches_the_same(
    selector: dict, labels: dict
) -> None:
    from_dict = label_selector_from_dict(selector)
    parsed = parse_label_selector(from_dict.to_string())
    assert parsed == from_dict
    assert parsed.matches(labels) == from_dict.matches(labels)


@settings(max_examples=200, deadline=None)
@given(value=st.text(max_size=12))
def test_any_field_value_survives_escape_and_parse(value: str) -> None:
    selector = parse_field_selector("metadata.name=" + escape_field_value(value))
    assert selector.equality_value("metadata.name") == value


def test_dict_selector_with_non_string_values_is_a_bad_request_not_a_crash() -> None:
    with pytest.raises(BadRequest, match="^3 is not a string$"):
        label_selector_from_dict({"matchLabels": {"replicas": 3}})
