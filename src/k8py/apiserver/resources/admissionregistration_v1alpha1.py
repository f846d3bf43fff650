"""admissionregistration.k8s.io/v1alpha1: MutatingAdmissionPolicy and its binding (alpha in 1.32).

Served only with the ``MutatingAdmissionPolicy`` feature gate (``k8py
apiserver --feature-gates MutatingAdmissionPolicy=true``), as upstream
serves them only with the gate and ``--runtime-config
admissionregistration.k8s.io/v1alpha1=true``. Defaults as upstream's:
``failurePolicy: Fail``, ``reinvocationPolicy: Never``, ``matchPolicy:
Equivalent``, empty selectors, rule ``scope: *``. Validation: at least one
mutation, each with a supported ``patchType`` and its expression compiling
(``Object{...}``/``JSONPatch{...}`` literals included), the policy's other
CEL compiling, ``matchConstraints.resourceRules`` present; a binding names
its policy. The plugin is :mod:`k8py.apiserver.webhooks.mutating_policy`.
"""

from __future__ import annotations

from typing import Any

from k8py.api.errors import Cause
from k8py.apiserver import cel
from k8py.apiserver.cel.mutation import restore_positions, rewrite
from k8py.apiserver.registry import ResourceDefinition
from k8py.apiserver.resources.admissionregistration import (
    _POLICY_VARIABLES, _TYPED, GROUP, _cel_causes, _default_rules, _default_selectors, _quote, _unsupported,
    default_binding_spec,
)
from k8py.apiserver.resources.strategies import StandardStrategy

__all__ = ["DEFINITIONS", "VERSION"]

Object = dict[str, Any]
VERSION = "v1alpha1"
_PATCH_TYPES = ("ApplyConfiguration", "JSONPatch")


class MutatingPolicyStrategy(StandardStrategy):
    def __init__(self) -> None:
        super().__init__(GROUP, VERSION, "MutatingAdmissionPolicy", tracks_generation=True)

    def default(self, obj: Object) -> None:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return
        spec.setdefault("failurePolicy", "Fail")
        spec.setdefault("reinvocationPolicy", "Never")
        constraints = spec.get("matchConstraints")
        if isinstance(constraints, dict):
            constraints.setdefault("matchPolicy", "Equivalent")
            _default_selectors(constraints)
            _default_rules(constraints.get("resourceRules"))
            _default_rules(constraints.get("excludeResourceRules"))

    def validate(self, obj: Object) -> list[Cause]:
        return self._validate(obj)

    def validate_update(self, obj: Object, old: Object) -> list[Cause]:
        return self._validate(obj)

    def _validate(self, obj: Object) -> list[Cause]:
        spec = obj.get("spec") or {}
        causes: list[Cause] = []
        if spec.get("failurePolicy") not in ("Fail", "Ignore"):
            causes.append(_unsupported("spec.failurePolicy", spec.get("failurePolicy"), ("Fail", "Ignore")))
        if spec.get("reinvocationPolicy") not in ("Never", "IfNeeded"):
            causes.append(_unsupported("spec.reinvocationPolicy", spec.get("reinvocationPolicy"), ("IfNeeded", "Never")))
        constraints = spec.get("matchConstraints")
        if not isinstance(constraints, dict) or not constraints.get("resourceRules"):
            causes.append(Cause("FieldValueRequired", "Required value", "spec.matchConstraints.resourceRules"))
        mutations = spec.get("mutations")
        if not isinstance(mutations, list) or not mutations:
            causes.append(Cause("FieldValueRequired", "Required value: mutations must contain at least one item",
                                "spec.mutations"))
        for i, mutation in enumerate(mutations if isinstance(mutations, list) else []):
            causes += _mutation_causes(mutation, f"spec.mutations[{i}]")
        for i, condition in enumerate(spec.get("matchConditions") or []):
            causes += _cel_causes((condition or {}).get("expression"), _POLICY_VARIABLES,
                                  f"spec.matchConditions[{i}].expression")
        for i, variable in enumerate(spec.get("variables") or []):
            causes += _cel_causes((variable or {}).get("expression"), _POLICY_VARIABLES,
                                  f"spec.variables[{i}].expression")
        return causes


def _mutation_causes(mutation: Any, path: str) -> list[Cause]:
    if not isinstance(mutation, dict):
        return [Cause("FieldValueInvalid", "Invalid value: a mutation must be an object", path)]
    patch_type = mutation.get("patchType")
    if patch_type not in _PATCH_TYPES:
        return [_unsupported(f"{path}.patchType", patch_type, _PATCH_TYPES)]
    key = "applyConfiguration" if patch_type == "ApplyConfiguration" else "jsonPatch"
    expression = (mutation.get(key) or {}).get("expression") if isinstance(mutation.get(key), dict) else None
    if not isinstance(expression, str) or not expression.strip():
        return [Cause("FieldValueRequired", "Required value: expression is required", f"{path}.{key}.expression")]
    rewritten, origins = rewrite(expression)
    try:
        cel.compile(rewritten, {name: _TYPED.get(name, "dyn") for name in _POLICY_VARIABLES})
    except cel.CompileError as err:  # quoted and positioned as written, not as the map literal compiled
        detail = restore_positions(str(err), expression, rewritten, origins)
        return [Cause("FieldValueInvalid", f"Invalid value: {_quote(expression)}: compilation failed: {detail}",
                      f"{path}.{key}.expression")]
    return []


class MutatingPolicyBindingStrategy(StandardStrategy):
    def __init__(self) -> None:
        super().__init__(GROUP, VERSION, "MutatingAdmissionPolicyBinding", tracks_generation=True)

    def default(self, obj: Object) -> None:
        default_binding_spec(obj, ("resourceRules",))

    def validate(self, obj: Object) -> list[Cause]:
        return self._validate(obj)

    def validate_update(self, obj: Object, old: Object) -> list[Cause]:
        return self._validate(obj)

    def _validate(self, obj: Object) -> list[Cause]:
        spec = obj.get("spec") or {}
        if not spec.get("policyName"):
            return [Cause("FieldValueRequired", "Required value", "spec.policyName")]
        return []


def _definition(kind: str, plural: str, strategy: StandardStrategy) -> ResourceDefinition:
    return ResourceDefinition(group=GROUP, version=VERSION, kind=kind, plural=plural, singular=kind.lower(),
                              namespaced=False, categories=("api-extensions",), strategy=strategy)


DEFINITIONS = [
    _definition("MutatingAdmissionPolicy", "mutatingadmissionpolicies", MutatingPolicyStrategy()),
    _definition("MutatingAdmissionPolicyBinding", "mutatingadmissionpolicybindings", MutatingPolicyBindingStrategy()),
]
