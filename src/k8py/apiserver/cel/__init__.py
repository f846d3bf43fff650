"""CEL for the API server: compile once, evaluate against JSON objects.

Used by CRD validation rules (``x-kubernetes-validations``), admission webhook
``matchConditions`` and ValidatingAdmissionPolicy. The engine is
cel-expr-python (Google's cel-cpp): it type-checks, prints errors in cel-go's
format, and evaluates in ~10 µs (README, "Dependencies, and why", has the
comparison with common-expression-language and cel-python).

The small API::

    from k8py.apiserver import cel
    program = cel.compile("self.replicas <= self.maxReplicas", ["self", "oldSelf"])
    program.evaluate({"self": {...}})            # -> True
    program.evaluate_with_cost({"self": {...}})  # -> (True, 5)

* :func:`compile` -> :class:`Program` (cached per expression and variables);
  :class:`CompileError` carries cel-go's message (``ERROR: <input>:1:6: ...``).
* :meth:`Program.evaluate` -> a Python value, or :class:`EvaluationError`
  (:class:`CostLimitError` past ``PER_CALL_LIMIT`` by default).
* :class:`Activation` binds values once for several programs over the same
  variables (the JSON-to-CEL conversion is most of an evaluation's cost).
* ``PER_CALL_LIMIT``, ``RUNTIME_BUDGET``, ``STATIC_ESTIMATED_COST_LIMIT``:
  upstream's limits (``k8s.io/apiserver/pkg/apis/cel``).

Modules: ``environment`` (the libraries, caches), ``program`` (evaluation,
conversions), ``errors``, ``cost`` and ``syntax_tree`` (cel-go cost units over
the checked tree), ``types`` (the opaque Kubernetes types as protobuf
messages), ``schema_types`` (an OpenAPI schema's CEL types, for checking) and one module per Kubernetes library: ``lists``, ``regex``,
``urls``, ``ip``, ``quantity``, ``formats``.

Layering: this package imports only :mod:`k8py.api` and its engine; it sits
in the bottom layer of the API server so validation and admission can use it.

Loaded on first use: importing this package (or :mod:`.cost`, :mod:`.errors`,
:mod:`.names`, :mod:`.mutation`'s rewriting) does not import the engine or
protobuf; ``compile``, ``Program``, ``Activation`` and ``Opaque`` import
:mod:`.program` when first asked for. A cluster with no CEL rules, policies or
matchConditions never loads them (some 45 ms of CPU on the API server's way
to its first answer, and 4 MB), and the modules that use CEL import it this
way or inside the functions that evaluate.
"""

from typing import TYPE_CHECKING, Any

from k8py.apiserver.cel.cost import PER_CALL_LIMIT, RUNTIME_BUDGET, STATIC_ESTIMATED_COST_LIMIT, Shape
from k8py.apiserver.cel.errors import CELError, CompileError, CostLimitError, EvaluationError

if TYPE_CHECKING:
    from k8py.apiserver.cel.program import Activation, Opaque, Program, compile

_FROM_PROGRAM = frozenset({"compile", "Program", "Activation", "Opaque"})


def __getattr__(name: str) -> Any:
    if name in _FROM_PROGRAM:
        from k8py.apiserver.cel import program

        value = getattr(program, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "compile", "Program", "Activation", "Opaque", "Shape",
    "CELError", "CompileError", "EvaluationError", "CostLimitError",
    "PER_CALL_LIMIT", "RUNTIME_BUDGET", "STATIC_ESTIMATED_COST_LIMIT",
]
