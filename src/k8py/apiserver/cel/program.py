"""A compiled expression and its evaluation against JSON-shaped activations.

:func:`compile` is the package's entry point::

    program = compile("object.metadata.name.startsWith('web-')", ["object", "oldObject"])
    program.evaluate({"object": pod, "oldObject": None})   # -> True

Activations are the JSON objects the API server holds (dicts, lists, str,
int, float, bool, None): no conversion on the fast path. Integers beyond
int64 (which cel-cpp refuses) are retried as doubles, as JSON decoding in Go
reads them.

Results come back as Python values: bool, int, float, str, bytes, None,
list, dict, ``datetime``/``timedelta``, and :class:`Opaque` for the Kubernetes
object types (``kubernetes.URL``, ``net.IP``, ``net.CIDR``,
``kubernetes.Quantity``).

Cost: an evaluation is charged in cel-go's units (:mod:`~k8py.apiserver.cel.cost`)
*before* it runs when the expression has a comprehension (the only construct
whose cost grows with the data beyond string lengths), so a runaway rule is
refused without being run; otherwise its cost is its node count. Invariant:
:meth:`Program.evaluate` either returns a value or raises
:class:`~k8py.apiserver.cel.errors.EvaluationError`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from k8py.apiserver.cel import cost as cost_model
from k8py.apiserver.cel import syntax_tree, types
from k8py.apiserver.cel.environment import Variables, compile_program, environment, variable_types
from k8py.apiserver.cel.errors import CostLimitError, EvaluationError, cel_go_message

__all__ = ["Program", "Opaque", "Activation", "compile"]

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_BIG_INT = "INVALID_ARGUMENT: Integer value"  # cel-cpp refusing an int beyond int64 in the data


@dataclasses.dataclass(frozen=True, slots=True)
class Opaque:
    """A Kubernetes CEL object value in a result: its type and canonical text."""

    type_name: str
    text: str


class Activation:
    """Values bound once for several programs over the same variables.

    Converting a JSON object into CEL values is most of an evaluation's cost;
    a CRD node with three rules converts its value once, not three times.
    """

    __slots__ = ("values", "variables", "_bound")

    def __init__(self, values: Mapping[str, Any], variables: Variables) -> None:
        self.values = values
        self.variables = variable_types(variables)
        self._bound: Any = None

    def bound(self) -> Any:
        if self._bound is None:
            self._bound = environment(self.variables).Activation(
                {name: self.values.get(name) for name, _ in self.variables})
        return self._bound


class Program:
    """One checked expression over declared variables; immutable and shareable."""

    __slots__ = ("source", "variables", "_expression", "_root", "_flat_cost", "_grows", "_positions")

    def __init__(self, source: str, variables: tuple[tuple[str, str], ...], expression: Any) -> None:
        self.source = source
        self.variables = variables
        self._expression = expression
        serialized = expression.serialize()
        self._root = syntax_tree.decode_checked(serialized)
        self._positions = syntax_tree.decode_positions(serialized)
        self._grows = cost_model.has_comprehension(self._root)
        self._flat_cost = cost_model.estimate(self._root, {})

    @property
    def return_type(self) -> str:
        """The checked result type: ``bool``, ``string``, ``dyn``, ..."""
        return str(self._expression.return_type().name()).lower()

    @property
    def syntax_tree(self) -> syntax_tree.Node:
        return self._root

    def offset_of(self, node: syntax_tree.Node) -> int:
        """Where ``node`` starts in :attr:`source` (0 if unknown)."""
        return self._positions.get(node.id, 0)

    def runtime_cost(self, activation: Mapping[str, Any]) -> int:
        """cel-go units to evaluate with ``activation`` (an upper bound)."""
        return cost_model.estimate(self._root, activation)

    def estimated_cost(self, shapes: Mapping[str, Any], *, unknown_size: int = 0) -> int:
        """The static estimate, with variables bound to :class:`~k8py.apiserver.cel.cost.Shape` values."""
        return cost_model.estimate(self._root, shapes, unknown_size=unknown_size)

    def evaluate(self, activation: Mapping[str, Any] | Activation, *, cost_limit: int | None = cost_model.PER_CALL_LIMIT) -> Any:
        """The expression's value; :class:`EvaluationError` (or :class:`CostLimitError`) otherwise."""
        return self.evaluate_with_cost(activation, cost_limit=cost_limit)[0]

    def evaluate_with_cost(self, activation: Mapping[str, Any] | Activation, *,
                           cost_limit: int | None = cost_model.PER_CALL_LIMIT) -> tuple[Any, int]:
        """``(value, cost)``: the cost lets a caller keep a budget across several programs."""
        bound = None
        if isinstance(activation, Activation):
            bound = activation.bound() if activation.variables == self.variables else None
            activation = activation.values
        spent = (cost_model.estimate(self._root, activation, limit=cost_limit) if self._grows
                 else self._flat_cost)
        if cost_limit is not None and spent > cost_limit:
            raise CostLimitError(cost=spent)
        data = {name: activation.get(name) for name, _ in self.variables}
        try:
            result = self._expression.eval(bound) if bound is not None else self._expression.eval(data=data)
            if str(result.type().name()) == "ERROR" and str(result.value()).startswith(_BIG_INT):
                result = self._expression.eval(data=_int64_safe(data))
        except (RuntimeError, TypeError, ValueError) as exc:
            raise EvaluationError(cel_go_message(str(exc))) from None
        return _to_python(result), spent


def compile(expression: str, variables: Variables = ("self",)) -> Program:  # noqa: A001 - the CEL verb
    """A cached :class:`Program` for ``expression``; ``CompileError`` with cel-go's message."""
    key = variable_types(variables)
    return _program(expression, key)


def _program(expression: str, key: tuple[tuple[str, str], ...]) -> Program:
    cached = _PROGRAMS.get((expression, key))
    if cached is None:
        cached = Program(expression, key, compile_program(expression, key))
        if len(_PROGRAMS) >= _MAX_PROGRAMS:
            _PROGRAMS.pop(next(iter(_PROGRAMS)))
        _PROGRAMS[(expression, key)] = cached
    return cached


_MAX_PROGRAMS = 4096
_PROGRAMS: dict[tuple[str, tuple[tuple[str, str], ...]], Program] = {}


def _to_python(result: Any) -> Any:
    type_name = str(result.type().name())
    if type_name == "ERROR":
        raise EvaluationError(cel_go_message(str(result.value())))
    try:
        value = result.plain_value()
    except (RuntimeError, TypeError) as exc:
        raise EvaluationError(f"a result of type {type_name} cannot be returned: {cel_go_message(str(exc))}") from None
    return _opaque(value)


def _opaque(value: Any) -> Any:
    if isinstance(value, list):
        return [_opaque(v) for v in value]
    if isinstance(value, dict):
        return {k: _opaque(v) for k, v in value.items()}
    if hasattr(value, "DESCRIPTOR"):
        return Opaque(types.type_name(value), value.value)
    return value


def _int64_safe(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if _INT64_MIN <= value <= _INT64_MAX else float(value)
    if isinstance(value, dict):
        return {k: _int64_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_int64_safe(v) for v in value]
    return value
