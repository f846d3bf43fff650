"""MutatingAdmissionPolicy's CEL: ``Object{...}``/``JSONPatch{...}`` literals as maps, ``jsonpatch.escapeKey``.

Upstream's mutations build their result with message literals of types
its type provider makes up on the fly::

    Object{spec: Object.spec{replicas: 3}}                      (ApplyConfiguration)
    [JSONPatch{op: "add", path: "/spec/x", value: 1}]          (JSONPatch)

cel-cpp only builds messages of types in its descriptor pool, and those
types have no fixed fields, so :func:`as_maps` rewrites the expression before
it is compiled: a literal whose type name is ``Object``, ``Object.<path>`` or
``JSONPatch`` becomes a map literal, each ``field:`` a ``'field':`` key
(``Object{spec: Object.spec{replicas: 3}}`` -> ``{'spec': {'replicas': 3}}``).
The result evaluates to the same JSON the API server applies. String and
bytes literals and comments are copied untouched; the rewrite only quotes
field names, so error columns after the first literal may move right by two
per quoted name. ``type()`` of such a value is ``map``, not ``Object``.

:func:`extension` adds ``jsonpatch.escapeKey(<string>)`` (``~`` -> ``~0``,
``/`` -> ``~1``), for a JSON Pointer to a key such as a label name.
"""

from __future__ import annotations

import re

from cel_expr_python import cel

__all__ = ["as_maps", "extension", "escape_key"]

_TYPE_NAME = re.compile(r"(?:Object(?:\s*\.\s*[A-Za-z_]\w*)*|JSONPatch)\s*\{")
_FIELD = re.compile(r"\s*([A-Za-z_]\w*)\s*:")
_STRING = re.compile(r"""(?:[rR]?[bB]?|[bB]?[rR]?)('''|\"\"\"|'|")""")


def _string_end(source: str, start: int) -> int:
    """The index after the string literal that starts at ``start`` (a quote, maybe prefixed)."""
    match = _STRING.match(source, start)
    assert match is not None
    quote = match.group(1)
    raw = "r" in source[start:match.start(1)].lower()
    i = match.end()
    while i < len(source):
        if not raw and source[i] == "\\":
            i += 2
            continue
        if source.startswith(quote, i):
            return i + len(quote)
        i += 1
    return len(source)


def as_maps(source: str) -> str:
    """``source`` with its ``Object``/``JSONPatch`` literals written as map literals."""
    if "Object" not in source and "JSONPatch" not in source:
        return source
    out: list[str] = []
    stack: list[str] = []  # open brackets: "(", "[", "{", and "O" for a rewritten literal's brace
    expect_field = False
    i, n = 0, len(source)
    while i < n:
        char = source[i]
        boundary = i == 0 or not (source[i - 1].isalnum() or source[i - 1] in "_.")
        prefix = _STRING.match(source, i) if char in "'\"" or (char in "rRbB" and boundary) else None
        if prefix is not None:
            end = _string_end(source, i)
            out.append(source[i:end])
            i, expect_field = end, False
            continue
        if source.startswith("//", i):
            end = source.find("\n", i)
            end = n if end < 0 else end
            out.append(source[i:end])
            i = end
            continue
        if expect_field:
            field = _FIELD.match(source, i)
            if field:
                out.append(f"'{field.group(1)}':")
                i, expect_field = field.end(), False
                continue
        literal = _TYPE_NAME.match(source, i) if char in "OJ" and boundary else None
        if literal:
            out.append("{")
            stack.append("O")
            i, expect_field = literal.end(), True
            continue
        if char in "([{":
            stack.append(char)
        elif char in ")]}" and stack:
            stack.pop()
        elif char == "," and stack and stack[-1] == "O":
            out.append(char)
            i, expect_field = i + 1, True
            continue
        if not char.isspace():
            expect_field = False
        out.append(char)
        i += 1
    return "".join(out)


def escape_key(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def extension() -> cel.CelExtension:
    return cel.CelExtension("k8py.jsonpatch", [cel.FunctionDecl("jsonpatch.escapeKey", [
        cel.Overload("jsonpatch_escape_key_string", cel.Type.STRING, [cel.Type.STRING], impl=escape_key)])])
