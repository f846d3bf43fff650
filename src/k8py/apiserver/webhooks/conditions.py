"""CEL where admission configuration carries it: the seam to the CEL environment.

Webhook ``matchConditions`` and ValidatingAdmissionPolicy expressions are CEL.
The expressions are compiled once, when a configuration is first seen (its
resourceVersion changes invalidate it), through an :class:`ExpressionCompiler`
(:func:`cel_compiler`: the API server's CEL package); a dispatcher only
evaluates. The ``authorizer`` variable upstream also offers is not provided.

:func:`activation` builds the variables upstream gives these expressions:
``object``, ``oldObject`` (null when absent), ``request`` (the
AdmissionRequest without its objects), and for policies ``params``,
``namespaceObject`` and ``variables``.
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol, Sequence

from k8py.apiserver import cel
from k8py.apiserver.webhooks.attributes import RequestAttributes, gvk_api, gvr_api, operation_name

__all__ = ["CompiledExpression", "ExpressionCompiler", "CompileError", "activation", "request_variable", "cel_compiler"]

Object = dict[str, Any]


class CompileError(Exception):
    """The expression does not compile (message as the CEL environment prints it)."""


class CompiledExpression(Protocol):
    def evaluate(self, activation: Mapping[str, Any]) -> Any:
        """The value, or raises (an evaluation error, e.g. no such key)."""
        ...


class ExpressionCompiler(Protocol):
    def __call__(self, expression: str, variables: Sequence[str]) -> CompiledExpression:
        """Compile ``expression`` with these top-level variable names; raise :class:`CompileError`."""
        ...


def cel_compiler(expression: str, variables: Sequence[str]) -> CompiledExpression:
    """The API server's CEL environment (:mod:`k8py.apiserver.cel`) as an :class:`ExpressionCompiler`."""
    try:
        return cel.compile(expression, list(variables))
    except cel.CompileError as err:
        raise CompileError(str(err)) from None


def request_variable(attrs: RequestAttributes) -> Object:
    request: Object = {
        "kind": gvk_api(attrs.kind),
        "resource": gvr_api(attrs.resource),
        "requestKind": gvk_api(attrs.kind),
        "requestResource": gvr_api(attrs.resource),
        "name": attrs.name,
        "namespace": attrs.namespace,
        "operation": operation_name(attrs.operation),
        "userInfo": attrs.user.to_api(),
        "dryRun": bool(attrs.dry_run),
    }
    if attrs.subresource:
        request["subResource"] = attrs.subresource
        request["requestSubResource"] = attrs.subresource
    if attrs.options:
        request["options"] = dict(attrs.options)
    return request


def activation(attrs: RequestAttributes, **extra: Any) -> dict[str, Any]:
    return {"object": attrs.object, "oldObject": attrs.old_object, "request": request_variable(attrs), **extra}
