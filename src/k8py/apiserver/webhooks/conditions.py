"""CEL where admission configuration carries it: the seam to the CEL environment.

Webhook ``matchConditions`` and ValidatingAdmissionPolicy expressions are CEL.
The expressions are compiled once, when a configuration is first seen (its
resourceVersion changes invalidate it), through an :class:`ExpressionCompiler`
the server injects (the CEL package); a dispatcher only evaluates.

:func:`activation` builds the variables upstream gives these expressions:
``object``, ``oldObject`` (null when absent), ``request`` (the
AdmissionRequest without its objects), and for policies ``params``,
``namespaceObject`` and ``variables``.
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol, Sequence

from k8py.apiserver.webhooks.attributes import RequestAttributes

__all__ = ["CompiledExpression", "ExpressionCompiler", "CompileError", "activation", "request_variable"]

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


def request_variable(attrs: RequestAttributes) -> Object:
    request: Object = {
        "kind": attrs.kind.to_api(),
        "resource": attrs.resource.to_api(),
        "requestKind": attrs.kind.to_api(),
        "requestResource": attrs.resource.to_api(),
        "name": attrs.name,
        "namespace": attrs.namespace,
        "operation": attrs.operation,
        "userInfo": attrs.user.to_api(),
        "dryRun": bool(attrs.dry_run),
    }
    if attrs.subresource:
        request["subResource"] = attrs.subresource
        request["requestSubResource"] = attrs.subresource
    if attrs.options is not None:
        request["options"] = attrs.options
    return request


def activation(attrs: RequestAttributes, **extra: Any) -> dict[str, Any]:
    return {"object": attrs.object, "oldObject": attrs.old_object, "request": request_variable(attrs), **extra}
