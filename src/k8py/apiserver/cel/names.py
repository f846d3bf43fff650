"""CEL names of schema properties (upstream's ``Escape``), apart from :mod:`.schema_types`.

Why a module of its own: validation needs :func:`property_name` for every
schema with CEL rules' values, and :mod:`.schema_types` imports the CEL
engine and protobuf, which the API server loads only once a CEL program is
compiled (a cluster without CEL rules or policies never does).
"""

from __future__ import annotations

import re

__all__ = ["property_name"]

_RESERVED = frozenset({"true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function",
                       "if", "import", "let", "loop", "package", "namespace", "return", "var", "void", "while"})
_EXPAND = re.compile(r"(__|[-./]|[^a-zA-Z0-9\-./_])")
_ESCAPES = {"__": "__underscores__", ".": "__dot__", "-": "__dash__", "/": "__slash__"}


def property_name(name: str) -> str | None:
    """The CEL name of a schema property (None: not accessible from CEL)."""
    if not name or name[0].isdigit():
        return None
    if name in _RESERVED:
        return f"__{name}__"
    ok = True

    def expand(match: re.Match[str]) -> str:
        nonlocal ok
        replacement = _ESCAPES.get(match.group(0))
        if replacement is None:
            ok = False
            return ""
        return replacement

    escaped = _EXPAND.sub(expand, name)
    return escaped if ok else None
