"""Samples read from a ``/metrics`` page (Prometheus text format), for assertions by label."""

from __future__ import annotations

import re

__all__ = ["samples"]

_LINE = re.compile(r'^(\w+)(?:\{(.*)\})? (\S+)$')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def samples(text: str, name: str, **match: str) -> list[tuple[dict[str, str], float]]:
    """(labels, value) of every sample called ``name`` whose labels include ``match``."""
    out = []
    for line in text.splitlines():
        found = _LINE.match(line)
        if found is None or found.group(1) != name:
            continue
        labels = dict(_LABEL.findall(found.group(2) or ""))
        if all(labels.get(k) == v for k, v in match.items()):
            out.append((labels, float(found.group(3))))
    return out
