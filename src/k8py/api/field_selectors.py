"""Field selectors (``fieldSelector=``): parse, match, print — apimachinery's semantics.

Only ``=``, ``==`` and ``!=``; values may escape ``\\``, ``,`` and ``=`` with a
backslash; no whitespace is trimmed (upstream neither). Which fields a kind
supports is the server's business: ``matches`` raises BadRequest
(``field label not supported: f``) when the getter answers None. Errors are
``BadRequest`` with upstream's messages. Immutable and free of I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from k8py.api.errors import BadRequest

__all__ = ["FieldTerm", "FieldSelector", "parse_field_selector", "escape_field_value"]


def escape_field_value(value: str) -> str:
    """Upstream ``fields.EscapeValue``: ``\\`` ``,`` ``=`` get a backslash."""
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def _unescape_field_value(raw: str) -> str:
    out: list[str] = []
    escaped = False
    for ch in raw:
        if escaped:
            if ch not in "\\,=":
                raise BadRequest(f"invalid field selector: invalid escape sequence: \\{ch}")
            out.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in ",=":
            # Go prints the rune with %v, i.e. as its code point number.
            raise BadRequest(f"invalid field selector: unescaped character in value: {ord(ch)}")
        else:
            out.append(ch)
    if escaped:
        raise BadRequest("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def _split_terms(text: str) -> list[str]:
    """Split on commas not preceded by a backslash escape; escapes are kept."""
    terms, start, escaped = [], 0, False
    for i, ch in enumerate(text):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


@dataclass(frozen=True, slots=True)
class FieldTerm:
    """``field=value`` or, with ``negated``, ``field!=value``."""

    field: str
    value: str
    negated: bool = False

    def matches(self, actual: str) -> bool:
        return (actual != self.value) if self.negated else (actual == self.value)

    def to_string(self) -> str:
        return f"{self.field}{'!=' if self.negated else '='}{escape_field_value(self.value)}"


@dataclass(frozen=True, slots=True)
class FieldSelector:
    """AND of field terms; empty selects everything."""

    terms: tuple[FieldTerm, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.terms

    @property
    def fields(self) -> tuple[str, ...]:
        """The field paths used, once each, so the server can check support up front."""
        return tuple(dict.fromkeys(t.field for t in self.terms))

    def matches(self, getter: Callable[[str], str | None]) -> bool:
        """``getter(field)`` is the object's value, or None if the kind lacks the field.

        An unsupported field raises ``BadRequest("field label not supported: f")``,
        which is what upstream answers for such a list.
        """
        for term in self.terms:
            actual = getter(term.field)
            if actual is None:
                raise BadRequest(f"field label not supported: {term.field}")
            if not term.matches(actual):
                return False
        return True

    def equality_value(self, field: str) -> str | None:
        """The value ``field`` must equal, if a ``=``/``==`` term pins it."""
        for term in self.terms:
            if term.field == field and not term.negated:
                return term.value
        return None

    def to_string(self) -> str:
        return ",".join(t.to_string() for t in self.terms)

    def __str__(self) -> str:
        return self.to_string()


def parse_field_selector(text: str) -> FieldSelector:
    """``metadata.name=a,status.phase!=Running`` → selector; ``""`` selects everything.

    The first ``!=``, ``==`` or ``=`` splits a term (no escapes on the left);
    terms are ordered by their text, as upstream sorts them.
    """
    terms: list[FieldTerm] = []
    for part in sorted(_split_terms(text)) if text else ():
        if not part:
            continue
        for i in range(len(part)):
            op = next((o for o in ("!=", "==", "=") if part.startswith(o, i)), None)
            if op is not None:
                value = _unescape_field_value(part[i + len(op):])
                terms.append(FieldTerm(part[:i], value, negated=op == "!="))
                break
        else:
            raise BadRequest(f"invalid selector: '{text}'; can't understand '{part}'")
    return FieldSelector(tuple(terms))
