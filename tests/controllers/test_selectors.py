"""controllers.selectors: parsed once, matched as LabelSelector.matches does."""

from __future__ import annotations

import pytest

from k8py.api.errors import BadRequest
from k8py.api.selectors import label_selector_from_dict
from k8py.controllers.selectors import labels_matcher, selector_from_dict

SELECTORS = [
    None, {}, {"matchLabels": {"app": "web"}}, {"matchLabels": {"app": "web", "tier": "front"}},
    {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "api"]}]},
    {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]},
    {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]},
    {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["back"]}]},
    {"matchExpressions": [{"key": "tier", "operator": "Exists"}]},
    {"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]},
]
LABELS = [None, {}, {"app": "web"}, {"app": "api"}, {"app": "web", "tier": "front"}, {"app": "web", "tier": "back"}, {"tier": "x"}]


@pytest.mark.parametrize("selector", SELECTORS)
def test_the_cached_selector_and_its_matcher_agree_with_the_parser(selector):
    parsed = label_selector_from_dict(selector)
    cached = selector_from_dict(selector)
    assert cached == parsed
    assert selector_from_dict(None if selector is None else dict(selector)) == parsed  # an equal dict hits the cache
    match = labels_matcher(cached)
    for labels in LABELS:
        assert match(labels) == parsed.matches(labels), labels


def test_an_invalid_selector_is_refused_every_time():
    bad = {"matchExpressions": [{"key": "app", "operator": "Near", "values": ["x"]}]}
    for _ in range(2):
        with pytest.raises(BadRequest, match="not a valid label selector operator"):
            selector_from_dict(bad)
