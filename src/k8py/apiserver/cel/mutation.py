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
bytes literals and comments are copied untouched. :func:`rewrite` also says
where each character came from, so :func:`restore_positions` reports a
compile error at its place in the expression as written. ``type()`` of such
a value is ``map``, not ``Object``.

:func:`extension` adds ``jsonpatch.escapeKey(<string>)`` (``~`` -> ``~0``,
``/`` -> ``~1``), for a JSON Pointer to a key such as a label name.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cel_expr_python import cel

__all__ = ["as_maps", "rewrite", "restore_positions", "extension", "escape_key"]

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
    return rewrite(source)[0]


def rewrite(source: str) -> tuple[str, list[int]]:
    """:func:`as_maps` and, for each character of the result, where it came from in ``source``."""
    if "Object" not in source and "JSONPatch" not in source:
        return source, list(range(len(source)))
    out: list[str] = []
    origins: list[int] = []

    def emit(text: str, origin: int, *, copied: bool = True) -> None:
        out.append(text)
        origins.extend(range(origin, origin + len(text)) if copied else [origin] * len(text))

    stack: list[str] = []  # open brackets: "(", "[", "{", and "O" for a rewritten literal's brace
    expect_field = False
    i, n = 0, len(source)
    while i < n:
        char = source[i]
        boundary = i == 0 or not (source[i - 1].isalnum() or source[i - 1] in "_.")
        prefix = _STRING.match(source, i) if char in "'\"" or (char in "rRbB" and boundary) else None
        if prefix is not None:
            end = _string_end(source, i)
            emit(source[i:end], i)
            i, expect_field = end, False
            continue
        if source.startswith("//", i):
            end = source.find("\n", i)
            end = n if end < 0 else end
            emit(source[i:end], i)
            i = end
            continue
        if expect_field:
            field = _FIELD.match(source, i)
            if field:
                emit("'", field.start(1), copied=False)
                emit(field.group(1), field.start(1))
                emit("':", field.end(1), copied=False)
                i, expect_field = field.end(), False
                continue
        literal = _TYPE_NAME.match(source, i) if char in "OJ" and boundary else None
        if literal:
            emit("{", literal.end() - 1, copied=False)
            stack.append("O")
            i, expect_field = literal.end(), True
            continue
        if char in "([{":
            stack.append(char)
        elif char in ")]}" and stack:
            stack.pop()
        elif char == "," and stack and stack[-1] == "O":
            emit(char, i)
            i, expect_field = i + 1, True
            continue
        if not char.isspace():
            expect_field = False
        emit(char, i)
        i += 1
    return "".join(out), origins


_ERROR = re.compile(r"^ERROR: <input>:(\d+):(\d+): (.*)$")


def restore_positions(message: str, source: str, rewritten: str, origins: list[int]) -> str:
    """A compile error of ``rewritten`` as one of ``source``: positions, source line and caret."""
    lines = message.split("\n")
    rewritten_starts = _line_starts(rewritten)
    source_lines = source.split("\n")
    source_starts = _line_starts(source)
    out = list(lines)
    for i, line in enumerate(lines):
        match = _ERROR.match(line)
        if not match:
            continue
        row, column = int(match.group(1)) - 1, int(match.group(2)) - 1
        if row >= len(rewritten_starts) or not origins:
            continue
        offset = origins[min(rewritten_starts[row] + column, len(origins) - 1)]
        source_row = max(r for r, start in enumerate(source_starts) if start <= offset)
        source_column = offset - source_starts[source_row]
        out[i] = f"ERROR: <input>:{source_row + 1}:{source_column + 1}: {match.group(3)}"
        if i + 2 < len(lines) and lines[i + 1].startswith(" | ") and lines[i + 2].startswith(" | "):
            out[i + 1] = f" | {source_lines[source_row]}"
            out[i + 2] = " | " + "." * source_column + "^"
    return "\n".join(out)


def _line_starts(text: str) -> list[int]:
    starts = [0]
    for index, char in enumerate(text):
        if char == "\n":
            starts.append(index + 1)
    return starts


def escape_key(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def extension() -> cel.CelExtension:
    from cel_expr_python import cel  # the engine only for an environment (see k8py.apiserver.cel)

    return cel.CelExtension("k8py.jsonpatch", [cel.FunctionDecl("jsonpatch.escapeKey", [
        cel.Overload("jsonpatch_escape_key_string", cel.Type.STRING, [cel.Type.STRING], impl=escape_key)])])
