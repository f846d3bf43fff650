"""Kubernetes' regex library: ``find`` and ``findAll`` on strings.

Upstream (``k8s.io/apiserver/pkg/cel/library/regex.go``)::

    <string>.find(<string>) string                the first match, or ''
    <string>.findAll(<string>) list<string>       every match
    <string>.findAll(<string>, <int>) list<string> at most n matches (n < 0: all)

Upstream compiles patterns with RE2; Python's ``re`` accepts the RE2 subset
that validation rules use (classes, anchors, groups, repetition). A pattern
``re`` rejects is an evaluation error with upstream's wording. Compiled
patterns are cached, since rules run the same pattern for every object.
"""

from __future__ import annotations

import functools
import re

from cel_expr_python import cel

__all__ = ["extension"]

T = cel.Type


@functools.lru_cache(maxsize=512)
def _compile(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"error parsing regexp: {exc.msg}: `{pattern}`") from None


def find(text: str, pattern: str) -> str:
    match = _compile(pattern).search(text)
    return match.group(0) if match else ""


def find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    if limit == 0:
        return []
    found = [m.group(0) for m in _compile(pattern).finditer(text)]
    return found if limit < 0 else found[:limit]


def extension() -> cel.CelExtension:
    return cel.CelExtension("k8py.regex", [
        cel.FunctionDecl("find", [cel.Overload("string_find_string", T.STRING, [T.STRING, T.STRING],
                                               is_member=True, impl=find)]),
        cel.FunctionDecl("findAll", [
            cel.Overload("string_find_all_string", T.List(T.STRING), [T.STRING, T.STRING], is_member=True,
                         impl=find_all),
            cel.Overload("string_find_all_string_int", T.List(T.STRING), [T.STRING, T.STRING, T.INT],
                         is_member=True, impl=find_all),
        ]),
    ])
