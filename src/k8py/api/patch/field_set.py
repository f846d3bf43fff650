"""Field sets: which fields of an object a manager owns, and their ``fieldsV1`` form.

A *path* names one node of an object as a tuple of path elements, each kept
as its canonical ``fieldsV1`` string:

* ``f:<name>`` — a member of an object (struct field or map key);
* ``k:{"name":"nginx"}`` — the item of a ``map`` list with those key values
  (compact JSON, keys sorted);
* ``v:"value"`` — the item of a ``set`` list with that value;
* ``i:<n>`` — the n-th item of a list (only seen in sets written by others;
  we never produce it, as upstream does not for the schemas we serve).

A :data:`FieldSet` is a ``frozenset`` of paths; a path in the set is a
*member*. ``fieldsV1`` nests the elements as JSON objects: a member with no
member below it is ``{}``; a member with members below it also carries
``".": {}``; a node that only leads to members has no ``"."``. Children are
written ``"."`` first, then ``f:``, ``k:``, ``v:``, ``i:`` elements in order, as
structured-merge-diff serialises them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

__all__ = [
    "Path",
    "FieldSet",
    "field",
    "key_element",
    "value_element",
    "index_element",
    "from_fields_v1",
    "to_fields_v1",
    "path_string",
    "sorted_paths",
    "with_prefixes",
]

Path = tuple[str, ...]
FieldSet = frozenset[Path]

_RANK = {"f": 0, "k": 1, "v": 2, "i": 3}


def _json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def field(name: str) -> str:
    return f"f:{name}"


def key_element(key_values: dict[str, Any]) -> str:
    return f"k:{_json(key_values)}"


def value_element(value: Any) -> str:
    return f"v:{_json(value)}"


def index_element(index: int) -> str:
    return f"i:{index}"


def _canonical(element: str) -> str:
    kind, _, rest = element.partition(":")
    if kind in ("k", "v"):
        try:
            return f"{kind}:{_json(orjson.loads(rest))}"
        except orjson.JSONDecodeError:
            return element
    return element


def from_fields_v1(fields: dict[str, Any] | None) -> FieldSet:
    """Decode a ``fieldsV1`` object; unknown shapes are skipped, not fatal."""
    out: set[Path] = set()

    def walk(node: dict[str, Any], prefix: Path) -> None:
        for raw, child in node.items():
            if raw == "." or not isinstance(child, dict):
                continue
            path = prefix + (_canonical(raw),)
            if not child or "." in child:
                out.add(path)
            walk(child, path)

    if isinstance(fields, dict):
        walk(fields, ())
    return frozenset(out)


def _element_sort_key(element: str) -> tuple[int, str]:
    return _RANK.get(element[:1], 4), element


def to_fields_v1(paths: Iterable[Path]) -> dict[str, Any]:
    """Encode a set of member paths as a ``fieldsV1`` object."""
    root: dict[str, Any] = {}
    members: set[Path] = set()
    for path in paths:
        members.add(path)
        node = root
        for element in path:
            node = node.setdefault(element, {})

    def render(node: dict[str, Any], prefix: Path) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if node and prefix in members:
            out["."] = {}
        for element in sorted(node, key=_element_sort_key):
            out[element] = render(node[element], prefix + (element,))
        return out

    return render(root, ())


def _element_string(element: str) -> str:
    kind, _, rest = element.partition(":")
    if kind == "f":
        return f".{rest}"
    if kind == "i":
        return f"[{rest}]"
    try:
        value = orjson.loads(rest)
    except orjson.JSONDecodeError:
        return f"[{rest}]"
    if kind == "k" and isinstance(value, dict):
        return "[" + ",".join(f"{k}={_json(value[k])}" for k in sorted(value)) + "]"
    return f"[={_json(value)}]"


def path_string(path: Path) -> str:
    """``.spec.containers[name="nginx"].image``: how upstream prints a path."""
    return "".join(_element_string(e) for e in path)


def sorted_paths(paths: Iterable[Path]) -> list[Path]:
    """Set iteration order: at each level members first, then subtrees."""

    def key(path: Path) -> tuple[tuple[int, int, str], ...]:
        last = len(path) - 1
        return tuple(
            (0 if i == last else 1, *_element_sort_key(e)) for i, e in enumerate(path)
        )

    return sorted(paths, key=key)


def with_prefixes(paths: Iterable[Path]) -> set[Path]:
    """Every path and every non-empty prefix of it (nodes that lead to members)."""
    out: set[Path] = set()
    for path in paths:
        for i in range(1, len(path) + 1):
            out.add(path[:i])
    return out
