"""Upstream's ToleratesTaint, as one table."""

from __future__ import annotations

import pytest

from k8py.api.taints import tolerates, untolerated

TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("toleration", "expected"),
    [
        ({"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}, True),
        ({"key": "dedicated", "value": "gpu"}, True),  # Equal by default, any effect
        ({"key": "dedicated", "value": "cpu"}, False),
        ({"key": "dedicated", "operator": "Exists"}, True),
        ({"operator": "Exists"}, True),  # empty key with Exists: every taint
        ({"operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "other", "operator": "Exists"}, False),
        ({"key": "dedicated", "operator": "Equal"}, False),  # absent value is ""
        ({"key": "dedicated", "operator": "Lt", "value": "gpu"}, False),  # unknown operator tolerates nothing
    ],
)
def test_tolerates(toleration, expected) -> None:
    assert tolerates(toleration, TAINT) is expected


def test_untolerated_keeps_the_taints_in_order() -> None:
    other = {"key": "zone", "value": "a", "effect": "NoExecute"}
    assert untolerated([TAINT, other], [{"key": "zone", "operator": "Exists"}]) == [TAINT]
    assert untolerated([TAINT, other], []) == [TAINT, other]
