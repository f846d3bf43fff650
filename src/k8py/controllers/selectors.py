"""A workload's label selector, parsed once and matched cheaply.

Why: every sync of a ReplicaSet or Deployment reads its ``spec.selector``,
and a ReplicaSet of 10,000 pods matches it against each of them. Parsing
(:func:`~k8py.api.selectors.label_selector_from_dict` validates every key
and value) cost tens of microseconds a sync, and the generic
:meth:`LabelSelector.matches` a few per pod.

- :func:`selector_from_dict` is ``label_selector_from_dict`` with a bounded
  cache keyed by the selector's canonical JSON: :class:`LabelSelector` is
  frozen, so one parsed value may be shared; an invalid selector raises
  ``BadRequest`` every time, as before (errors are not cached);
- :func:`labels_matcher` is ``selector.matches`` as a plain function; a
  selector of equalities only (every ``matchLabels``-only selector) becomes
  one subset test of dict items.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Mapping

import orjson

from k8py.api.selectors import LabelSelector, Operator, label_selector_from_dict

__all__ = ["selector_from_dict", "labels_matcher"]

_EQUALITY = (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.IN)


def selector_from_dict(selector: Mapping[str, Any] | None) -> LabelSelector:
    """``label_selector_from_dict(selector)``, parsed once per distinct selector."""
    if selector is None:
        return label_selector_from_dict(None)
    try:
        key = orjson.dumps(selector, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # not JSON-shaped: let the parser say what is wrong
        return label_selector_from_dict(selector)
    return _parsed(key)


@functools.lru_cache(maxsize=4096)
def _parsed(key: bytes) -> LabelSelector:
    return label_selector_from_dict(orjson.loads(key))


def labels_matcher(selector: LabelSelector) -> Callable[[Mapping[str, str] | None], bool]:
    """A function saying whether ``labels`` match ``selector`` (``selector.matches``)."""
    if selector.nothing:
        return lambda labels: False
    requirements = selector.requirements
    if all(r.operator in _EQUALITY and len(r.values) == 1 for r in requirements):
        wanted = {r.key: r.values[0] for r in requirements}
        if len(wanted) == len(requirements):  # one requirement per key (else the generic path)
            items = wanted.items()
            return lambda labels: items <= (labels or {}).items()
    return selector.matches
