"""ValidatingAdmissionPolicies and their bindings as the plugin sees them, from the watch cache.

:class:`PolicySource` keeps every ValidatingAdmissionPolicy compiled (its
matchConditions, variables, validations, messageExpressions and
auditAnnotations, through the CEL environment) and pairs each binding with
its policy, sorted by binding name. Rebuilt only when a policy's or a
binding's resourceVersion changes; a request pays a comparison of versions.
An expression that does not compile is kept with its error: evaluating it
fails the way ``failurePolicy`` says, as upstream.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from k8py.apiserver.registry import Registry
from k8py.apiserver.watch.cacher import Cacher
from k8py.apiserver.webhooks.conditions import CompiledExpression, CompileError, ExpressionCompiler

__all__ = ["PolicySource", "CompiledPolicy", "Expression", "BoundPolicy", "POLICY_VARIABLES"]

Object = dict[str, Any]
GROUP = "admissionregistration.k8s.io"
POLICY_VARIABLES = ("object", "oldObject", "request", "params", "namespaceObject", "variables", "authorizer",
                    "authorizer.requestResource")


@dataclass(frozen=True, slots=True)
class Expression:
    source: str
    program: CompiledExpression | None
    error: str = ""


@dataclass
class CompiledPolicy:
    name: str
    spec: Object
    conditions: list[tuple[str, Expression]] = field(default_factory=list)
    variables: list[tuple[str, Expression]] = field(default_factory=list)
    #: (validation as written, its expression, its messageExpression or None)
    validations: list[tuple[Object, Expression, Expression | None]] = field(default_factory=list)
    audit_annotations: list[tuple[str, Expression]] = field(default_factory=list)
    #: MutatingAdmissionPolicy: (patchType, its expression)
    mutations: list[tuple[str, Expression]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class BoundPolicy:
    binding_name: str
    binding: Object  # the binding's spec
    policy: CompiledPolicy


#: the versions seen when there are no policies and no bindings
_NONE: tuple[Any, ...] = ((), ())


class PolicySource:
    """The ValidatingAdmissionPolicies and their bindings (the class attributes name them)."""

    version = "v1"
    policies = "validatingadmissionpolicies"
    bindings = "validatingadmissionpolicybindings"

    def __init__(self, registry: Registry, cacher: Cacher, compiler: ExpressionCompiler | None) -> None:
        self.registry = registry
        self.cacher = cacher
        self.compiler = compiler
        self._versions: tuple[Any, ...] = ()
        self._bound: list[BoundPolicy] = []
        self._policies: dict[tuple[str, int], CompiledPolicy] = {}

    def _objects(self, plural: str) -> list[tuple[str, int, bytes]]:
        definition = self.registry.get(GROUP, self.version, plural)
        if definition is None:
            return []
        return sorted((c.name, c.rv, c.data) for c in self.cacher.cache_for(definition).objects.values())

    def bound(self) -> list[BoundPolicy]:
        policies = self._objects(self.policies)
        bindings = self._objects(self.bindings)
        if not policies and not bindings and self._versions == _NONE:
            return self._bound  # the common case, every write: no policies, none before
        versions = (tuple((n, rv) for n, rv, _ in policies), tuple((n, rv) for n, rv, _ in bindings))
        if versions == self._versions:
            return self._bound
        compiled: dict[str, CompiledPolicy] = {}
        cache: dict[tuple[str, int], CompiledPolicy] = {}
        for name, rv, data in policies:
            policy = self._policies.get((name, rv)) or self._compile(orjson.loads(data))
            cache[(name, rv)] = policy
            compiled[name] = policy
        bound = []
        for name, _, data in bindings:
            spec = orjson.loads(data).get("spec") or {}
            policy = compiled.get(spec.get("policyName", ""))
            if policy is not None:  # a binding to a policy that does not exist (yet) does nothing
                bound.append(BoundPolicy(name, spec, policy))
        self._policies, self._bound, self._versions = cache, bound, versions
        return bound

    def _expression(self, source: str, compiled_as: str | None = None) -> Expression:
        """``source`` compiled (``compiled_as``: the text compiled instead, errors kept with ``source``)."""
        if self.compiler is None:
            return Expression(source, None, "no CEL environment is configured on this API server")
        try:
            return Expression(source, self.compiler(compiled_as or source, POLICY_VARIABLES))
        except CompileError as err:
            return Expression(source, None, str(err))

    def _compile(self, obj: Object) -> CompiledPolicy:
        spec = obj.get("spec") or {}
        policy = CompiledPolicy(obj["metadata"]["name"], spec)
        for condition in spec.get("matchConditions") or []:
            policy.conditions.append((str(condition.get("name", "")), self._expression(str(condition.get("expression", "")))))
        for variable in spec.get("variables") or []:
            policy.variables.append((str(variable.get("name", "")), self._expression(str(variable.get("expression", "")))))
        for validation in spec.get("validations") or []:
            message = validation.get("messageExpression")
            policy.validations.append((validation, self._expression(str(validation.get("expression", ""))),
                                       self._expression(str(message)) if message else None))
        for annotation in spec.get("auditAnnotations") or []:
            policy.audit_annotations.append((str(annotation.get("key", "")), self._expression(str(annotation.get("valueExpression", "")))))
        return policy
