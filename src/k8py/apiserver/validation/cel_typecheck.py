"""Type-checking a CRD's ``x-kubernetes-validations`` against its schema.

Upstream compiles each rule with ``self`` (and ``oldSelf``) typed from the
schema node the rule sits on, so a rule that does not type-check refuses
the CRD: ``self.replicas > 'a'`` gives ``compilation failed: ERROR:
<input>:1:15: found no matching overload for '_>_' applied to '(int,
string)'``, a misspelt field ``undefined field 'replicaz'``, a rule whose
type is not ``bool`` ``cel expression must evaluate to a bool``, a
``messageExpression`` that is not a ``string`` ``must evaluate to a string``.

:class:`NodeTypes` holds one node's types (built by
:func:`k8py.apiserver.cel.schema_types.declare`, once per CRD write) and
checks that node's rules. Rules still *run* as the ``dyn`` programs of
:mod:`.cel_compile`; this module only decides what the CRD write accepts.

``optionalOldSelf`` rules: cel-expr-python cannot declare an optional-typed
variable, so the rule is checked inside ``cel.bind(oldSelf, <optional of a
typed value>, <rule>)`` and the error positions are moved back into the
rule as written.
"""

from __future__ import annotations

import functools
import logging
import re
from typing import Any

import orjson
from typing import TYPE_CHECKING

from k8py.apiserver.cel import CompileError

if TYPE_CHECKING:
    from k8py.apiserver.cel import schema_types
# (the engine, environment and schema_types are imported where a schema's rules are checked: see k8py.apiserver.cel)

__all__ = ["NodeTypes", "node_types"]

logger = logging.getLogger(__name__)

Schema = dict[str, Any]
_WRAP_PREFIX = "cel.bind(oldSelf, k8pyHasOldSelf ? optional.of(k8pyOldSelfValue) : optional.none(), "
_POSITION = re.compile(r"^ERROR: <input>:(\d+):(\d+): (.*)$")


class NodeTypes:
    """The typed environments of one schema node with rules."""

    def __init__(self, declared: schema_types.SchemaType) -> None:
        from k8py.apiserver.cel import environment

        self._declared = declared
        self._plain = environment.typed_environment(
            declared.pool, {"self": declared.type, "oldSelf": declared.type})
        self._optional_env: Any = None  # built on first use (~5 ms an environment)

    @property
    def _optional(self) -> Any:
        if self._optional_env is None:
            from cel_expr_python import cel as engine

            from k8py.apiserver.cel import environment

            declared = self._declared
            self._optional_env = environment.typed_environment(
                declared.pool, {"self": declared.type, "k8pyOldSelfValue": declared.type,
                                "k8pyHasOldSelf": engine.Type.BOOL})
        return self._optional_env

    def check_rule(self, text: str, *, optional_old_self: bool) -> str:
        """"" or the error detail upstream gives for the rule ``text``."""
        from k8py.apiserver.cel import environment

        try:
            if optional_old_self:
                result = _unwrapped(lambda: environment.check(self._optional, f"{_WRAP_PREFIX}{text})"), text)
            else:
                result = environment.check(self._plain, text)
        except CompileError as exc:
            return f"compilation failed: {exc}"
        if result not in ("bool", ""):
            return "cel expression must evaluate to a bool"
        return ""

    def check_message(self, text: str) -> str:
        """"" or the error detail for the ``messageExpression`` ``text``."""
        from k8py.apiserver.cel import environment

        try:
            result = environment.check(self._plain, text)
        except CompileError as exc:
            return f"messageExpression compilation failed: {exc}"
        if result not in ("string", ""):
            return "must evaluate to a string"
        return ""


def node_types(schema: Schema, *, root: bool) -> NodeTypes | None:
    """The types of a node with rules (None: its rules are checked untyped); kept per schema
    text, since a CRD is validated again on each of its updates (building them costs ~10 ms)."""
    try:
        key = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return _node_types(schema, root)
    return _cached_node_types(key, root)


@functools.lru_cache(maxsize=256)
def _cached_node_types(key: bytes, root: bool) -> NodeTypes | None:
    return _node_types(orjson.loads(key), root)


def _node_types(schema: Schema, root: bool) -> NodeTypes | None:
    from k8py.apiserver.cel import schema_types

    try:
        declared = schema_types.declare(schema, root=root or bool(schema.get("x-kubernetes-embedded-resource")))
    except (TypeError, ValueError) as exc:
        logger.warning("CEL types for a schema node could not be built (%s); its rules are checked untyped", exc)
        return None
    return NodeTypes(declared) if declared is not None else None


def _unwrapped(check: Any, text: str) -> str:
    """Run ``check`` on the wrapped rule; a CompileError's positions as in ``text``."""
    try:
        return str(check())
    except CompileError as exc:
        raise CompileError(_shift(str(exc), text)) from None


def _shift(message: str, text: str) -> str:
    lines = message.split("\n")
    first_line = text.split("\n", 1)[0]
    out = list(lines)
    for i, line in enumerate(lines):
        match = _POSITION.match(line)
        if not match or match.group(1) != "1":
            continue
        column = max(int(match.group(2)) - len(_WRAP_PREFIX), 1)
        out[i] = f"ERROR: <input>:1:{column}: {match.group(3)}"
        if i + 2 < len(lines):
            out[i + 1] = f" | {first_line}"
            out[i + 2] = " | " + "." * (column - 1) + "^"
    return "\n".join(out)
