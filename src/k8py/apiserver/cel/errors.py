"""CEL errors, worded as cel-go (and so the Kubernetes API server) prints them.

Exception tree::

    CELError                 anything this package raises about an expression
    ├── CompileError         the expression does not parse or type-check:
    │                        ``ERROR: <input>:1:6: undefined field 'foo'\\n | self.foo\\n | .....^``
    └── EvaluationError      evaluating failed: ``no such key: foo``
        └── CostLimitError   the per-call cost limit was hit:
                             ``operation cancelled: actual cost limit exceeded``

cel-cpp reports errors as absl statuses (``INVALID_ARGUMENT: ERROR: <input>...
[INVALID_ARGUMENT]``, ``NOT_FOUND: Key not found in map : "foo"``);
:func:`cel_go_message` strips the status code and rewrites the messages whose
wording differs from cel-go's, since clients show them verbatim.
"""

from __future__ import annotations

import re

__all__ = ["CELError", "CompileError", "EvaluationError", "CostLimitError", "cel_go_message"]


class CELError(Exception):
    """An expression failed; ``str(exc)`` is the message upstream prints."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class CompileError(CELError):
    """The expression does not compile (syntax or type check)."""


class EvaluationError(CELError):
    """Evaluating the expression failed at run time."""


class CostLimitError(EvaluationError):
    """The evaluation would exceed its cost limit."""

    def __init__(self, message: str = "operation cancelled: actual cost limit exceeded", *, cost: int = 0) -> None:
        super().__init__(message)
        self.cost = cost


_STATUS = re.compile(r"^(?:INVALID_ARGUMENT|NOT_FOUND|UNKNOWN|OUT_OF_RANGE|FAILED_PRECONDITION|UNIMPLEMENTED|"
                     r"INTERNAL|ALREADY_EXISTS|PERMISSION_DENIED|RESOURCE_EXHAUSTED|ABORTED|CANCELLED|"
                     r"DATA_LOSS|UNAVAILABLE|DEADLINE_EXCEEDED|UNAUTHENTICATED): ")
_TRAILER = re.compile(r" \[[A-Z_]+\]$")
_REWRITES = [
    (re.compile(r'^Key not found in map : "?(.*?)"?$'), r"no such key: \1"),
    (re.compile(r"^No matching overloads found : .*$"), "no such overload"),
    (re.compile(r"^divide by zero$"), "division by zero"),
    (re.compile(r"^Index error: index=(-?\d+) size=(\d+)$"), r"index '\1' out of range in list size '\2'"),
    (re.compile(r"^No such key: (.*)$"), r"no such key: \1"),
]


_UNDECLARED = re.compile(r"^ERROR: <input>:(\d+):(\d+): undeclared reference to '([\w.]+)' \(in container '(.*?)'\)$")


def cel_go_message(text: str) -> str:
    message = _TRAILER.sub("", _STATUS.sub("", text.strip()))
    if message.startswith("ERROR: "):
        return "\n".join(_compile_error_lines(message.split("\n")))
    for pattern, replacement in _REWRITES:
        if pattern.match(message):
            return pattern.sub(replacement, message)
    return message


_LINE_REWRITES = [
    (re.compile(r"^(ERROR: <input>:\d+:\d+: undefined field '.*?') not found in struct '.*'$"), r"\1"),
    (re.compile(r"^(ERROR: <input>:\d+:\d+: )expression of type '(.*)' cannot be the operand of a select operation$"),
     r"\1type '\2' does not support field selection"),
    (re.compile(r"^(ERROR: <input>:\d+:\d+: expression of type '.*' cannot be) the (range of a comprehension.*)$"),
     r"\1 \2"),
]
_OVERLOAD = re.compile(r"^(ERROR: <input>:\d+:(\d+): found no matching overload for '[\w.]+' applied to ')\((.*)\)'$")
_MEMBER_CALL = re.compile(r"\.\s*[A-Za-z_]\w*\s*$")


def _compile_error_lines(lines: list[str]) -> list[str]:
    """cel-cpp's type errors as cel-go words them (error triples: message, source line, caret)."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("ERROR: ") and "*error*" in line:
            i += 3  # cel-go reports no error on a value whose type is already an error
            continue
        for pattern, replacement in _LINE_REWRITES:
            line = pattern.sub(replacement, line)
        overload = _OVERLOAD.match(line)
        if overload and i + 1 < len(lines):
            source, column = lines[i + 1][3:], int(overload.group(2)) - 1
            if source[column:column + 1] == "(" and _MEMBER_CALL.search(source[:column]):
                target, _, rest = _split_types(overload.group(3))
                line = f"{overload.group(1)}{target}.({rest})'"
        out.append(line)
        i += 1
    return _undeclared_lines(out)


def _split_types(text: str) -> tuple[str, str, str]:
    """``'map(string, int), int'`` -> ``('map(string, int)', ',', 'int')`` (the first type at depth 0)."""
    depth = 0
    for i, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            return text[:i], ",", text[i + 1:].lstrip()
    return text, "", ""


def _undeclared_lines(lines: list[str]) -> list[str]:
    """cel-cpp names an undeclared ``a.b`` whole, at its last dot; cel-go names ``a``, at ``a``."""
    out = list(lines)
    for i, line in enumerate(lines):
        match = _UNDECLARED.match(line)
        if not match or "." not in match.group(3) or i + 2 >= len(lines):
            continue
        source, column, dotted = lines[i + 1][3:], int(match.group(2)), match.group(3)
        start = _span_start(source, dotted, column - 1)
        if start is None:
            continue
        first = dotted.split(".", 1)[0]
        out[i] = (f"ERROR: <input>:{match.group(1)}:{start + 1}: undeclared reference to '{first}' "
                  f"(in container '{match.group(4)}')")
        out[i + 2] = " | " + "." * start + "^"
    return out


def _span_start(source: str, dotted: str, index: int) -> int | None:
    position = source.find(dotted)
    while position != -1:
        if position <= index < position + len(dotted):
            return position
        position = source.find(dotted, position + 1)
    return None
