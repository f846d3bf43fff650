"""Fields a CEL rule selects that its schema does not declare: upstream's
``undefined field 'x'`` compile error, found without schema-derived CEL types.

Rules compile with ``self`` as ``dyn`` (:mod:`.cel_compile`), so cel-cpp's
checker cannot see a misspelt field; :func:`undefined_fields` walks the
checked tree with the schema instead: identifiers bound to schema nodes,
field selections, ``has()``, ``.?`` optional selection, indexing, and the
iteration variables of comprehensions (a list's items, a map's keys).
Positions come from the tree's source info, so the error reads as cel-go's
(``ERROR: <input>:1:10: undefined field 'x'`` with the caret line).
"""

from __future__ import annotations

from typing import Any

from k8py.apiserver import cel

__all__ = ["undefined_fields"]

Schema = dict[str, Any]


_ROOT_META = {"type": "object", "properties": {"name": {"type": "string"}, "generateName": {"type": "string"}}}
_ROOT_FIELDS = {"apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": _ROOT_META}


def undefined_fields(program: cel.Program, schema: Schema, *, root: bool) -> str:
    """cel-go's ``undefined field 'x'`` errors for ``program`` over ``schema``
    ("" when every selected field is declared).

    Upstream type-checks rules against types built from the schema; here
    ``self`` is ``dyn``, so this walk over the checked tree finds what that
    type check would: a field selected (``self.x``, ``has(self.x)``,
    ``self.?x``) on an object schema that neither declares it nor allows
    unknown fields. At the root and in an embedded resource ``apiVersion``,
    ``kind`` and ``metadata.name``/``generateName`` are declared.
    """
    node = {**schema, "x-k8py-root": True} if root else schema
    errors: list[tuple[int, str]] = []
    _resolve(program.syntax_tree, {"self": node, "oldSelf": node}, program, errors)
    return "\n".join(_format(program.source, offset, message) for offset, message in sorted(errors))


def _format(source: str, offset: int, message: str) -> str:
    line_no = source.count("\n", 0, offset) + 1
    start = source.rfind("\n", 0, offset) + 1
    end = source.find("\n", offset)
    line = source[start:] if end < 0 else source[start:end]
    column = offset - start
    return f"ERROR: <input>:{line_no}:{column + 1}: {message}\n | {line}\n | {'.' * column}^"


def _field(parent: Schema, name: str) -> tuple[Schema | None, bool]:
    """(the field's schema or None for dyn, whether it is undefined)."""
    if parent.get("x-k8py-root") or parent.get("x-kubernetes-embedded-resource"):
        if name in _ROOT_FIELDS and name not in (parent.get("properties") or {}):
            return _ROOT_FIELDS[name], False
    if parent.get("type") != "object" or parent.get("x-kubernetes-preserve-unknown-fields"):
        return None, False
    props = parent.get("properties") or {}
    if name in props:
        return props[name], False
    additional = parent.get("additionalProperties")
    if isinstance(additional, dict):
        return additional, False
    if additional is True:
        return None, False
    return None, True


def _resolve(node: Any, scope: dict[str, Any], program: cel.Program, errors: list[tuple[int, str]]) -> Schema | None:
    if node.kind == "ident":
        return scope.get(node.name)
    if node.kind == "select" and node.children:
        parent = _resolve(node.children[0], scope, program, errors)
        return _select(parent, node.name, node, program, errors)
    if node.kind == "comprehension":
        range_node, init, condition, step, result = node.children
        items = _resolve(range_node, scope, program, errors)
        inner = dict(scope)
        inner[node.accu] = None
        element: Schema | None = None
        if isinstance(items, dict):
            if items.get("type") == "array" and isinstance(items.get("items"), dict):
                element = items["items"]
            elif items.get("type") == "object":
                element = {"type": "string"}  # a map's keys
        inner[node.name] = element
        for child in (init, condition, step, result):
            _resolve(child, inner, program, errors)
        return None
    children = [_resolve(child, scope, program, errors) for child in node.children]
    if node.kind == "call" and node.name == "_[_]" and children and isinstance(children[0], dict):
        container = children[0]
        if container.get("type") == "array" and isinstance(container.get("items"), dict):
            return container["items"]
        if isinstance(container.get("additionalProperties"), dict):
            return container["additionalProperties"]
    if node.kind == "call" and node.name == "_?._" and len(node.children) == 2 \
            and node.children[1].kind == "const" and isinstance(node.children[1].value, str):
        _select(children[0], node.children[1].value, node, program, errors)
    return None


def _select(parent: Schema | None, name: str, node: Any, program: cel.Program,
            errors: list[tuple[int, str]]) -> Schema | None:
    if not isinstance(parent, dict):
        return None
    found, undefined = _field(parent, name)
    if undefined:
        errors.append((program.offset_of(node), f"undefined field '{name}'"))
    return found
