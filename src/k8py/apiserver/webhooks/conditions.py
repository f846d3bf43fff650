"""CEL where admission configuration carries it: the seam to the CEL environment.

Webhook ``matchConditions`` and ValidatingAdmissionPolicy expressions are CEL.
The expressions are compiled once, when a configuration is first seen (its
resourceVersion changes invalidate it), through an :class:`ExpressionCompiler`
(:func:`cel_compiler`: the API server's CEL package); a dispatcher only
evaluates.

:func:`activation` builds the variables upstream gives these expressions:
``object``, ``oldObject`` (null when absent), ``request`` (the
AdmissionRequest without its objects), ``authorizer`` and
``authorizer.requestResource`` (the authorizer library: checks as the
requesting user), and for policies ``params``, ``namespaceObject`` and
``variables``. :func:`evaluate` runs a program with the authorizer checks it
asks for decided by :func:`authorize_with` over the server's authorizer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Protocol, Sequence

from k8py.apiserver import cel
from k8py.apiserver.authn.user import UserInfo
from k8py.apiserver.authz.attributes import Attributes, Authorizer, Decision
from k8py.apiserver.webhooks.attributes import RequestAttributes, gvk_api, gvr_api, operation_name

if TYPE_CHECKING:
    from k8py.apiserver.cel import authorizer as cel_authorizer
# (imported where an expression is evaluated: the CEL engine loads on first use, see k8py.apiserver.cel)

__all__ = ["CompiledExpression", "ExpressionCompiler", "CompileError", "activation", "request_variable", "cel_compiler",
           "AUTHORIZER_VARIABLES", "authorize_with", "evaluate"]

#: the authorizer library's variables, and their CEL types
AUTHORIZER_VARIABLES = {"authorizer": "authorizer", "authorizer.requestResource": "resourceCheck"}

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
        return cel.compile(expression, {name: AUTHORIZER_VARIABLES.get(name, "dyn") for name in variables})
    except cel.CompileError as err:
        raise CompileError(str(err)) from None


def request_variable(attrs: RequestAttributes, *, kind: Any = None, resource: Any = None) -> Object:
    """The AdmissionRequest without its objects; ``kind``/``resource``: as matched (default: as requested)."""
    request: Object = {
        "kind": gvk_api(kind or attrs.kind),
        "resource": gvr_api(resource or attrs.resource),
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


def activation(attrs: RequestAttributes, *, kind: Any = None, resource: Any = None, **extra: Any) -> dict[str, Any]:
    """The variables; ``extra`` adds (or replaces: ``object``/``oldObject`` in a matched version) some."""
    from k8py.apiserver.cel import authorizer as cel_authorizer

    user = attrs.user.to_api()
    group, version, plural = attrs.resource
    return {"object": attrs.object, "oldObject": attrs.old_object,
            "request": request_variable(attrs, kind=kind, resource=resource),
            "authorizer": cel_authorizer.authorizer_value(user),
            "authorizer.requestResource": cel_authorizer.request_resource_value(
                user, group=group, version=version, resource=plural, subresource=attrs.subresource or "",
                namespace=attrs.namespace or "", name=attrs.name or ""),
            **extra}


def authorize_with(authorizer: Authorizer | None) -> cel_authorizer.Authorize | None:
    """The authorizer library's decisions from the server's ``authorizer``."""
    if authorizer is None:
        return None

    async def authorize(check: dict[str, Any]) -> tuple[bool, str, str]:
        path = check.get("path")
        attributes = Attributes(
            user=UserInfo.from_api(check.get("user") or {}), verb=str(check.get("verb") or ""),
            resource_request=path is None, api_group=str(check.get("group") or ""),
            api_version=str(check.get("version") or "*"), resource=str(check.get("resource") or ""),
            subresource=str(check.get("subresource") or ""), namespace=str(check.get("namespace") or ""),
            name=str(check.get("name") or ""), path=str(path or ""))
        try:
            decision, reason = await authorizer.authorize(attributes)
        except Exception as err:  # the authorizer's failure is the check's error(), as upstream
            return False, "", str(err)
        return decision is Decision.ALLOW, reason, ""

    return authorize


async def evaluate(program: CompiledExpression, variables: Mapping[str, Any],
                   authorize: cel_authorizer.Authorize | None) -> Any:
    """``program``'s value with the authorizer checks it makes decided by ``authorize``."""
    from k8py.apiserver.cel import authorizer as cel_authorizer

    return await cel_authorizer.evaluate(lambda: program.evaluate(variables), authorize)
