"""Compiling a CRD schema's ``x-kubernetes-validations`` rules, and checking them.

Upstream (``apiextensions-apiserver/pkg/apiserver/schema/cel/compilation.go``
and the CRD validation) compiles every rule when a CRD is created or updated
and refuses the CRD when one does not compile, does not return a bool, has a
``messageExpression`` that is not a string, a ``fieldPath`` that does not
name a field of the schema, a ``reason`` outside the four, or an estimated
cost beyond ``StaticEstimatedCostLimit`` (per rule) or
``StaticEstimatedCRDCostLimit`` (all rules, times how often each runs).

:func:`compile_rule` gives a :class:`CompiledRule` (the same, cached program
at CRD time and on every write); :func:`crd_causes` the CRD-time causes,
worded as upstream's (``...x-kubernetes-validations[0].rule: Invalid value:
apiextensions.ValidationRule{Rule:"self.x(", ...}: compilation failed:
ERROR: <input>:1:8: ...``).

Types: rules *run* as programs compiled with ``self`` and ``oldSelf`` as
``dyn`` (evaluation on the JSON values, no conversion); at CRD time each is
also type-checked against CEL types derived from its schema node
(:mod:`.cel_typecheck`), which gives upstream's type errors. ``optionalOldSelf`` rules are
compiled inside ``cel.bind(oldSelf, <optional of the old value>, <rule>)``,
since cel-cpp takes no optional value from Python.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Any

from k8py.api.errors import Cause
from k8py.api.names import go_quote
from k8py.apiserver import cel
from k8py.apiserver.cel.cost import STATIC_ESTIMATED_CRD_COST_LIMIT
from k8py.apiserver.validation.cel_typecheck import NodeTypes, node_types
from k8py.apiserver.validation.field import Raw, forbidden, invalid, not_supported, required

__all__ = ["CompiledRule", "compile_rule", "crd_causes", "normalize_field_path", "REASONS", "SchemaShape"]

Schema = dict[str, Any]

REASONS = ("FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired")
MAX_REQUEST_SIZE = 3 * 1024 * 1024
RULE_VARIABLES = ("self", "oldSelf")
OPTIONAL_VARIABLES = ("self", "k8pyOldSelfValue", "k8pyHasOldSelf")
_OPTIONAL_WRAP = "cel.bind(oldSelf, k8pyHasOldSelf ? optional.of(k8pyOldSelfValue) : optional.none(), {rule})"


@dataclasses.dataclass(frozen=True)
class CompiledRule:
    """One validation rule, ready to evaluate (``error`` set when it is not)."""

    rule: Schema
    program: cel.Program | None
    message_program: cel.Program | None
    uses_old_self: bool
    optional_old_self: bool
    field_path: str
    error: str = ""
    message_error: str = ""

    @property
    def text(self) -> str:
        return str(self.rule.get("rule") or "").strip()

    @property
    def error_string(self) -> str:
        """Upstream ``ruleErrorString``: the message if there is one, else the rule."""
        message = str(self.rule.get("message") or "").strip()
        return message or self.text

    @property
    def message_or_default(self) -> str:
        message = str(self.rule.get("message") or "").strip()
        return message or f"failed rule: {self.text}"


def _uses(node: Any, name: str) -> bool:
    stack = [node]
    while stack:
        n = stack.pop()
        if n.kind == "ident" and n.name == name:
            return True
        stack.extend(n.children)
    return False


def compile_rule(rule: Schema, schema: Schema) -> CompiledRule:
    """``rule`` (an ``x-kubernetes-validations`` entry) compiled for ``schema``."""
    return _compile(_freeze(rule), _freeze_field_path(rule, schema))


def _freeze(rule: Schema) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((k, v) for k, v in rule.items() if isinstance(v, (str, bool)) or v is None))


def _freeze_field_path(rule: Schema, schema: Schema) -> str:
    path = str(rule.get("fieldPath") or "").strip()
    if not path:
        return ""
    normalized = normalize_field_path(path, schema)
    return normalized if normalized is not None else ""


@functools.lru_cache(maxsize=4096)
def _compile(frozen: tuple[tuple[str, Any], ...], field_path: str) -> CompiledRule:
    rule = dict(frozen)
    text = str(rule.get("rule") or "")  # compiled as written: error columns count from its first character
    optional = rule.get("optionalOldSelf") is True
    program = message_program = None
    error = message_error = ""
    uses_old_self = False
    try:
        plain = cel.compile(text, RULE_VARIABLES)
        uses_old_self = _uses(plain.syntax_tree, "oldSelf")
        program = cel.compile(_OPTIONAL_WRAP.format(rule=text), OPTIONAL_VARIABLES) if optional else plain
        if plain.return_type not in ("bool", "dyn"):
            error, program = "cel expression must evaluate to a bool", None
    except cel.CompileError as exc:
        error = f"compilation failed: {exc}"
    expression = str(rule.get("messageExpression") or "")
    if expression.strip():
        try:
            message_program = cel.compile(expression, RULE_VARIABLES)
            if message_program.return_type not in ("string", "dyn"):
                message_error, message_program = "must evaluate to a string", None
        except cel.CompileError as exc:
            message_error = f"messageExpression compilation failed: {exc}"
    return CompiledRule(rule=rule, program=program, message_program=message_program, uses_old_self=uses_old_self,
                        optional_old_self=optional, field_path=field_path, error=error, message_error=message_error)


# -- schema shapes: what the static cost estimate knows of a value ------------------


def _min_size(schema: Schema) -> int:
    if schema.get("nullable"):
        return 4
    return {"string": 2, "integer": 1, "number": 1, "boolean": 4, "object": 2, "array": 2}.get(
        str(schema.get("type") or ""), 1)


class SchemaShape:
    """A schema node as a :class:`k8py.apiserver.cel.Shape`: its largest size.

    Bounds are ``maxLength``/``maxItems``/``maxProperties``; unbounded ones are
    upstream's worst case for one request of 3 MiB (a list of ``n`` items of
    minimal size ``m`` holds at most ``(3 MiB - 2) / (m + 1)`` of them).
    """

    def __init__(self, schema: Schema) -> None:
        self.schema = schema if isinstance(schema, dict) else {}
        self.max_size = self._max_size()

    def _max_size(self) -> int:
        s = self.schema
        kind = s.get("type")
        if kind == "string":
            return int(s["maxLength"]) if isinstance(s.get("maxLength"), int) else MAX_REQUEST_SIZE - 2
        if kind == "array":
            if isinstance(s.get("maxItems"), int):
                return int(s["maxItems"])
            return (MAX_REQUEST_SIZE - 2) // (_min_size(s.get("items") or {}) + 1)
        if kind == "object" or s.get("x-kubernetes-preserve-unknown-fields"):
            if isinstance(s.get("maxProperties"), int):
                return int(s["maxProperties"])
            if isinstance(s.get("additionalProperties"), dict) or s.get("x-kubernetes-preserve-unknown-fields"):
                return (MAX_REQUEST_SIZE - 2) // (_min_size(s.get("additionalProperties") or {}) + 4 + 1)
            return len(s.get("properties") or {})
        return 1

    def field(self, name: str) -> SchemaShape | None:
        props = self.schema.get("properties") or {}
        if name in props:
            return SchemaShape(props[name])
        if isinstance(self.schema.get("additionalProperties"), dict):
            return SchemaShape(self.schema["additionalProperties"])
        return None

    def item(self) -> SchemaShape | None:
        if isinstance(self.schema.get("items"), dict):
            return SchemaShape(self.schema["items"])
        if isinstance(self.schema.get("additionalProperties"), dict):
            return SchemaShape(self.schema["additionalProperties"])
        return None


def _cost_message(description: str, cost: int, limit: int) -> str:
    factor = cost / limit
    text = "more than 100x" if factor > 100 else f"{factor:.1f}x"
    return (f"{description} exceeds budget by factor of {text} (try simplifying the rule, or adding maxItems, "
            "maxProperties, and maxLength where arrays, maps, and strings are declared)")


# -- fieldPath -------------------------------------------------------------------------

_TOKEN = re.compile(r"\.([^.\[\]]+)|\['((?:[^'\\]|\\.)*)'\]")


def normalize_field_path(path: str, schema: Schema) -> str | None:
    """``.spec.x`` or ``['a.b']`` -> the field path upstream appends (None: not a field)."""
    out = ""
    node = schema
    position = 0
    while position < len(path):
        match = _TOKEN.match(path, position)
        if not match or not isinstance(node, dict):
            return None
        name = match.group(1) if match.group(1) is not None else re.sub(r"\\(.)", r"\1", match.group(2))
        props = node.get("properties")
        if isinstance(props, dict) and props:
            if name not in props:
                return None
            node, out = props[name], f"{out}.{name}" if out else name
        elif isinstance(node.get("additionalProperties"), dict):
            node, out = node["additionalProperties"], f"{out}[{name}]"
        else:
            return None
        position = match.end()
    return out


# -- CRD-time checks -----------------------------------------------------------------


def _go_rule(rule: Schema) -> str:
    """``%#v`` of upstream's internal ``apiextensions.ValidationRule``."""
    def quoted(key: str) -> str:
        return go_quote(str(rule.get(key) or ""))
    reason = "(*apiextensions.FieldValueErrorReason)(nil)" if not rule.get("reason") else \
        "(*apiextensions.FieldValueErrorReason)(0xc000a1b2c0)"
    optional = "(*bool)(nil)" if rule.get("optionalOldSelf") is None else "(*bool)(0xc000a1b2c8)"
    return (f"apiextensions.ValidationRule{{Rule:{quoted('rule')}, Message:{quoted('message')}, "
            f"MessageExpression:{quoted('messageExpression')}, Reason:{reason}, FieldPath:{quoted('fieldPath')}, "
            f"OptionalOldSelf:{optional}}}")


def crd_causes(schema: Schema, path: str) -> list[Cause]:
    """Upstream's causes for the rules of one version's ``openAPIV3Schema`` at ``path``."""
    causes: list[Cause] = []
    total = [0]
    _walk(schema, path, causes, total, cardinality=1, uncorrelatable="", root=True)
    if total[0] > STATIC_ESTIMATED_CRD_COST_LIMIT:
        causes.append(forbidden(path, _cost_message(
            "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema", total[0],
            STATIC_ESTIMATED_CRD_COST_LIMIT)))
    return causes


def _walk(schema: Any, path: str, causes: list[Cause], total: list[int], *, cardinality: int,
          uncorrelatable: str, root: bool = False) -> None:
    if not isinstance(schema, dict):
        return
    rules = schema.get("x-kubernetes-validations")
    if isinstance(rules, list) and rules:
        types = node_types(schema, root=root)
        for i, rule in enumerate(rules):
            if isinstance(rule, dict):
                total[0] += _check_rule(rule, schema, f"{path}.x-kubernetes-validations[{i}]", causes,
                                        uncorrelatable, types) * cardinality
    shape = SchemaShape(schema)
    for name, sub in (schema.get("properties") or {}).items():
        _walk(sub, f"{path}.properties[{name}]", causes, total, cardinality=cardinality,
              uncorrelatable=uncorrelatable)
    if isinstance(schema.get("items"), dict):
        list_map = schema.get("x-kubernetes-list-type") == "map"
        _walk(schema["items"], f"{path}.items", causes, total, cardinality=cardinality * max(shape.max_size, 1),
              uncorrelatable=uncorrelatable or ("" if list_map else path))
    if isinstance(schema.get("additionalProperties"), dict):
        _walk(schema["additionalProperties"], f"{path}.additionalProperties", causes, total,
              cardinality=cardinality * max(shape.max_size, 1), uncorrelatable=uncorrelatable)
    for i, sub in enumerate(schema.get("allOf") or []):
        _walk(sub, f"{path}.allOf[{i}]", causes, total, cardinality=cardinality, uncorrelatable=uncorrelatable)


def _check_rule(rule: Schema, schema: Schema, path: str, causes: list[Cause], uncorrelatable: str,
                types: NodeTypes | None) -> int:
    text = str(rule.get("rule") or "").strip()
    message = rule.get("message")
    if not text:
        causes.append(required(f"{path}.rule", "rule is not specified"))
        return 0
    if isinstance(message, str) and message and not message.strip():
        causes.append(invalid(f"{path}.message", message, "message must be non-empty if specified"))
    if isinstance(message, str) and "\n" in message.strip():
        causes.append(invalid(f"{path}.message", message, "message must not contain line breaks"))
    if "\n" in text and not str(message or "").strip():
        causes.append(required(f"{path}.message", "message must be specified if rule contains line breaks"))
    expression = rule.get("messageExpression")
    if isinstance(expression, str) and expression and not expression.strip():
        causes.append(required(f"{path}.messageExpression", "messageExpression must be non-empty if specified"))
    reason = rule.get("reason")
    if reason is not None and reason not in REASONS:
        causes.append(not_supported(f"{path}.reason", reason, REASONS))
    field_path = rule.get("fieldPath")
    if isinstance(field_path, str) and field_path:
        if not field_path.strip():
            causes.append(invalid(f"{path}.fieldPath", field_path, "fieldPath must be non-empty if specified"))
        elif "\n" in field_path:
            causes.append(invalid(f"{path}.fieldPath", field_path, "fieldPath must not contain line breaks"))
        elif normalize_field_path(field_path.strip(), schema) is None:
            causes.append(invalid(f"{path}.fieldPath", field_path, "fieldPath must be a valid path"))
    compiled = compile_rule(rule, schema)
    cost = 0
    # the typed check's error first: it names the schema's types where the dyn program says "dyn"
    typed = types.check_rule(str(rule.get("rule") or ""), optional_old_self=compiled.optional_old_self) \
        if types is not None else ""
    if compiled.error or typed:
        causes.append(invalid(f"{path}.rule", Raw(_go_rule(rule)), typed or compiled.error))
    elif compiled.program is not None:
        shape = SchemaShape(schema)
        cost = compiled.program.estimated_cost({"self": shape, "oldSelf": shape, "k8pyOldSelfValue": shape})
        if cost > cel.STATIC_ESTIMATED_COST_LIMIT:
            causes.append(forbidden(f"{path}.rule", _cost_message("estimated rule cost", cost,
                                                                  cel.STATIC_ESTIMATED_COST_LIMIT)))
        if compiled.uses_old_self and uncorrelatable:
            causes.append(invalid(f"{path}.rule", text, "oldSelf cannot be used on the uncorrelatable portion of "
                                  f"the schema within {uncorrelatable}"))
    message_typed = types.check_message(str(rule.get("messageExpression") or "")) \
        if types is not None and str(rule.get("messageExpression") or "").strip() else ""
    if compiled.message_error or message_typed:
        causes.append(invalid(f"{path}.messageExpression", Raw(_go_rule(rule)),
                              message_typed or compiled.message_error))
    elif compiled.message_program is not None:
        shape = SchemaShape(schema)
        message_cost = compiled.message_program.estimated_cost({"self": shape, "oldSelf": shape})
        if message_cost > cel.STATIC_ESTIMATED_COST_LIMIT:
            causes.append(forbidden(f"{path}.messageExpression", _cost_message(
                "estimated messageExpression cost", message_cost, cel.STATIC_ESTIMATED_COST_LIMIT)))
    return cost
