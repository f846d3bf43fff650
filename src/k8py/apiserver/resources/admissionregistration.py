"""admissionregistration.k8s.io/v1: webhook configurations and admission policies.

Four cluster-scoped kinds, defaulted and validated as upstream's
``pkg/apis/admissionregistration`` does (the messages are upstream's):

- MutatingWebhookConfiguration / ValidatingWebhookConfiguration: a list of
  ``webhooks``, each a name (a domain of three or more segments, unique in the
  configuration), a ``clientConfig`` (exactly one of ``url`` — https, no
  fragment or query — or ``service``), ``rules``, selectors, ``sideEffects``
  (None or NoneOnDryRun in v1), ``admissionReviewVersions`` (must include v1
  or v1beta1) and ``timeoutSeconds`` (1..30). Defaults: failurePolicy Fail,
  matchPolicy Equivalent, empty selectors, rule scope ``*``, timeout 10 s,
  service port 443, reinvocationPolicy Never (mutating only).
- ValidatingAdmissionPolicy / ValidatingAdmissionPolicyBinding: CEL
  validations over matchConstraints; ``policyName`` and
  ``validationActions`` on the binding. Defaults: failurePolicy Fail,
  matchPolicy Equivalent, empty selectors, scope ``*``; a binding's
  ``paramRef.parameterNotFoundAction`` Deny.

CEL expressions (matchConditions, validations, messageExpressions,
variables, auditAnnotations) are compiled here with the variables their
evaluators give them, and refused as upstream words it (``Invalid value:
"<expr>": compilation failed: ERROR: <input>:…``); the dispatchers in
``k8py.apiserver.webhooks`` compile them again from the cache (the program
cache makes that free).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from k8py.api.errors import Cause
from k8py.apiserver import cel
from k8py.apiserver.registry import ResourceDefinition
from k8py.apiserver.resources.strategies import StandardStrategy

__all__ = ["DEFINITIONS", "GROUP"]

GROUP = "admissionregistration.k8s.io"
Object = dict[str, Any]

_OPERATIONS = ("*", "CONNECT", "CREATE", "DELETE", "UPDATE")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _quote(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)


def _unsupported(field: str, value: Any, supported: tuple[str, ...]) -> Cause:
    listed = ", ".join(f'"{s}"' for s in supported)
    return Cause("FieldValueNotSupported", f"Unsupported value: {_quote(value)}: supported values: {listed}", field)


_WEBHOOK_VARIABLES = ("object", "oldObject", "request", "authorizer", "authorizer.requestResource")
_POLICY_VARIABLES = ("object", "oldObject", "request", "params", "namespaceObject", "variables", "authorizer",
                     "authorizer.requestResource")
#: the authorizer library's variables are typed (its functions are members of those types)
_TYPED = {"authorizer": "authorizer", "authorizer.requestResource": "resourceCheck"}


def _cel_causes(expression: Any, variables: tuple[str, ...], field: str) -> list[Cause]:
    if not isinstance(expression, str) or not expression:
        return []
    try:
        cel.compile(expression, {name: _TYPED.get(name, "dyn") for name in variables})
    except cel.CompileError as err:
        return [Cause("FieldValueInvalid", f"Invalid value: {_quote(expression)}: compilation failed: {err}", field)]
    return []


def _default_selectors(holder: Object, keys: tuple[str, ...] = ("namespaceSelector", "objectSelector")) -> None:
    for key in keys:
        if holder.get(key) is None:
            holder[key] = {}


def _default_rules(rules: Any) -> None:
    for rule in rules if isinstance(rules, list) else []:
        if isinstance(rule, dict) and rule.get("scope") is None:
            rule["scope"] = "*"


def default_binding_spec(obj: Object, rule_lists: tuple[str, ...] = ("resourceRules", "excludeResourceRules")) -> None:
    """A policy binding's defaults (ValidatingAdmissionPolicyBinding, MutatingAdmissionPolicyBinding):
    matchPolicy Equivalent, empty selectors, rule scope ``*``, paramRef's parameterNotFoundAction Deny."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    resources = spec.get("matchResources")
    if isinstance(resources, dict):
        resources.setdefault("matchPolicy", "Equivalent")
        _default_selectors(resources)
        for key in rule_lists:
            _default_rules(resources.get(key))
    ref = spec.get("paramRef")
    if isinstance(ref, dict):
        ref.setdefault("parameterNotFoundAction", "Deny")


def _validate_rules(rules: Any, field: str, *, allow_connect: bool = True) -> list[Cause]:
    causes: list[Cause] = []
    for i, rule in enumerate(rules if isinstance(rules, list) else []):
        path = f"{field}[{i}]"
        if not isinstance(rule, dict):
            continue
        for key in ("apiGroups", "apiVersions", "resources"):
            values = rule.get(key) or []
            if not values:
                causes.append(Cause("FieldValueRequired", "Required value", f"{path}.{key}"))
            elif "*" in values and len(values) > 1:
                causes.append(Cause("FieldValueInvalid", f"Invalid value: {_go_list(values)}: if '*' is present, must not specify other {key[3:].lower() if key != 'resources' else 'resources'}", f"{path}.{key}"))
        ops = rule.get("operations") or []
        if not ops:
            causes.append(Cause("FieldValueRequired", "Required value", f"{path}.operations"))
        for j, op in enumerate(ops):
            if op not in _OPERATIONS or (op == "CONNECT" and not allow_connect):
                causes.append(_unsupported(f"{path}.operations[{j}]", op, _OPERATIONS))
        scope = rule.get("scope")
        if scope not in (None, "*", "Cluster", "Namespaced"):
            causes.append(_unsupported(f"{path}.scope", scope, ("*", "Cluster", "Namespaced")))
        for j, resource in enumerate(rule.get("resources") or []):
            if isinstance(resource, str) and "/" in resource and resource.split("/", 1)[0] == "":
                causes.append(Cause("FieldValueInvalid", f'Invalid value: "{resource}": must not specify an empty resource', f"{path}.resources[{j}]"))
    return causes


def _go_list(values: list[Any]) -> str:
    return "[]string{" + ", ".join(f'"{v}"' for v in values) + "}"


def _validate_client_config(config: Any, field: str) -> list[Cause]:
    if not isinstance(config, dict):
        return [Cause("FieldValueRequired", "Required value: exactly one of url or service is required", field)]
    url, service = config.get("url"), config.get("service")
    if (url is None) == (service is None):
        return [Cause("FieldValueRequired", "Required value: exactly one of url or service is required", field)]
    causes: list[Cause] = []
    if url is not None:
        parts = urlsplit(str(url))
        if parts.scheme != "https":
            causes.append(Cause("FieldValueInvalid", f'Invalid value: "{parts.scheme}": \'https\' is the only allowed URL scheme', f"{field}.url"))
        if not parts.hostname:
            causes.append(Cause("FieldValueInvalid", f'Invalid value: "{parts.netloc}": host must be specified', f"{field}.url"))
        if parts.fragment:
            causes.append(Cause("FieldValueInvalid", f'Invalid value: "{parts.fragment}": fragments are not permitted', f"{field}.url"))
        if parts.query:
            causes.append(Cause("FieldValueInvalid", f'Invalid value: "{parts.query}": query parameters are not permitted', f"{field}.url"))
    else:
        if not service.get("name"):
            causes.append(Cause("FieldValueRequired", "Required value: service name is required", f"{field}.service.name"))
        if not service.get("namespace"):
            causes.append(Cause("FieldValueRequired", "Required value: service namespace is required", f"{field}.service.namespace"))
        port = service.get("port", 443)
        if not isinstance(port, int) or not 1 <= port <= 65535:
            causes.append(Cause("FieldValueInvalid", f"Invalid value: {port}: port is not valid: must be between 1 and 65535, inclusive", f"{field}.service.port"))
        path = service.get("path")
        if path is not None and not str(path).startswith("/"):
            causes.append(Cause("FieldValueInvalid", f'Invalid value: "{path}": must start with a \'/\'', f"{field}.service.path"))
    return causes


class WebhookConfigurationStrategy(StandardStrategy):
    """Both webhook configuration kinds; ``mutating`` adds reinvocationPolicy."""

    def __init__(self, kind: str, *, mutating: bool) -> None:
        super().__init__(GROUP, "v1", kind)
        self.mutating = mutating

    def default(self, obj: Object) -> None:
        for hook in obj.get("webhooks") or []:
            if not isinstance(hook, dict):
                continue
            hook.setdefault("failurePolicy", "Fail")
            hook.setdefault("matchPolicy", "Equivalent")
            _default_selectors(hook)
            _default_rules(hook.get("rules"))
            hook.setdefault("timeoutSeconds", 10)
            if self.mutating:
                hook.setdefault("reinvocationPolicy", "Never")
            service = (hook.get("clientConfig") or {}).get("service")
            if isinstance(service, dict):
                service.setdefault("port", 443)

    def validate(self, obj: Object) -> list[Cause]:
        return self._validate(obj)

    def validate_update(self, obj: Object, old: Object) -> list[Cause]:
        return self._validate(obj)

    def _validate(self, obj: Object) -> list[Cause]:
        causes: list[Cause] = []
        seen: set[str] = set()
        hooks = obj.get("webhooks") or []
        if not isinstance(hooks, list):
            return [Cause("FieldValueInvalid", "Invalid value: must be a list", "webhooks")]
        for i, hook in enumerate(hooks):
            path = f"webhooks[{i}]"
            if not isinstance(hook, dict):
                causes.append(Cause("FieldValueInvalid", "Invalid value: must be an object", path))
                continue
            name = hook.get("name") or ""
            if not name:
                causes.append(Cause("FieldValueRequired", "Required value", f"{path}.name"))
            elif name in seen:
                causes.append(Cause("FieldValueDuplicate", f'Duplicate value: "{name}"', f"{path}.name"))
            elif len(name.split(".")) < 3 or not all(_DNS1123_LABEL.match(p) for p in name.split(".")):
                causes.append(Cause("FieldValueInvalid", f'Invalid value: "{name}": should be a domain with at least three segments separated by dots', f"{path}.name"))
            seen.add(name)
            causes += _validate_rules(hook.get("rules"), f"{path}.rules")
            if hook.get("failurePolicy") not in ("Fail", "Ignore"):
                causes.append(_unsupported(f"{path}.failurePolicy", hook.get("failurePolicy"), ("Fail", "Ignore")))
            if hook.get("matchPolicy") not in ("Exact", "Equivalent"):
                causes.append(_unsupported(f"{path}.matchPolicy", hook.get("matchPolicy"), ("Equivalent", "Exact")))
            side_effects = hook.get("sideEffects")
            if side_effects is None:
                causes.append(Cause("FieldValueRequired", "Required value: must specify one of None, NoneOnDryRun", f"{path}.sideEffects"))
            elif side_effects not in ("None", "NoneOnDryRun"):
                causes.append(_unsupported(f"{path}.sideEffects", side_effects, ("None", "NoneOnDryRun")))
            timeout = hook.get("timeoutSeconds")
            if not isinstance(timeout, int) or not 1 <= timeout <= 30:
                causes.append(Cause("FieldValueInvalid", f"Invalid value: {timeout}: the timeout value must be between 1 and 30 seconds", f"{path}.timeoutSeconds"))
            causes += _validate_client_config(hook.get("clientConfig"), f"{path}.clientConfig")
            condition_names: set[str] = set()
            for j, condition in enumerate(hook.get("matchConditions") or []):
                cname = (condition or {}).get("name") or ""
                if not cname:
                    causes.append(Cause("FieldValueRequired", "Required value", f"{path}.matchConditions[{j}].name"))
                elif cname in condition_names:
                    causes.append(Cause("FieldValueDuplicate", f'Duplicate value: "{cname}"', f"{path}.matchConditions[{j}].name"))
                condition_names.add(cname)
                if not (condition or {}).get("expression"):
                    causes.append(Cause("FieldValueRequired", "Required value", f"{path}.matchConditions[{j}].expression"))
                causes += _cel_causes((condition or {}).get("expression"), _WEBHOOK_VARIABLES, f"{path}.matchConditions[{j}].expression")
            if self.mutating and hook.get("reinvocationPolicy") not in ("Never", "IfNeeded"):
                causes.append(_unsupported(f"{path}.reinvocationPolicy", hook.get("reinvocationPolicy"), ("IfNeeded", "Never")))
            versions = hook.get("admissionReviewVersions") or []
            if not versions:
                causes.append(Cause("FieldValueRequired", "Required value: must specify one of v1, v1beta1", f"{path}.admissionReviewVersions"))
            elif not any(v in ("v1", "v1beta1") for v in versions):
                causes.append(Cause("FieldValueInvalid", f"Invalid value: {_go_list(versions)}: must include at least one of v1, v1beta1", f"{path}.admissionReviewVersions"))
        return causes


class PolicyStrategy(StandardStrategy):
    """ValidatingAdmissionPolicy: spec defaults and structure (CEL compiled by the dispatcher)."""

    def __init__(self) -> None:
        super().__init__(GROUP, "v1", "ValidatingAdmissionPolicy", has_status=True, tracks_generation=True)

    def default(self, obj: Object) -> None:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return
        spec.setdefault("failurePolicy", "Fail")
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
        constraints = spec.get("matchConstraints")
        if not isinstance(constraints, dict) or not constraints.get("resourceRules"):
            causes.append(Cause("FieldValueRequired", "Required value", "spec.matchConstraints.resourceRules"))
        else:
            causes += _validate_rules(constraints.get("resourceRules"), "spec.matchConstraints.resourceRules")
        if not spec.get("validations") and not spec.get("auditAnnotations"):
            causes.append(Cause("FieldValueRequired", "Required value: validations or auditAnnotations must contain at least one item", "spec.validations"))
        for i, condition in enumerate(spec.get("matchConditions") or []):
            causes += _cel_causes((condition or {}).get("expression"), _POLICY_VARIABLES, f"spec.matchConditions[{i}].expression")
        for i, variable in enumerate(spec.get("variables") or []):
            causes += _cel_causes((variable or {}).get("expression"), _POLICY_VARIABLES, f"spec.variables[{i}].expression")
        for i, validation in enumerate(spec.get("validations") or []):
            if not (validation or {}).get("expression"):
                causes.append(Cause("FieldValueRequired", "Required value", f"spec.validations[{i}].expression"))
            causes += _cel_causes((validation or {}).get("expression"), _POLICY_VARIABLES, f"spec.validations[{i}].expression")
            causes += _cel_causes((validation or {}).get("messageExpression"), _POLICY_VARIABLES, f"spec.validations[{i}].messageExpression")
            reason = (validation or {}).get("reason")
            if reason is not None and reason not in ("Unauthorized", "Forbidden", "Invalid", "RequestEntityTooLarge"):
                causes.append(_unsupported(f"spec.validations[{i}].reason", reason, ("Forbidden", "Invalid", "RequestEntityTooLarge", "Unauthorized")))
        for i, annotation in enumerate(spec.get("auditAnnotations") or []):
            causes += _cel_causes((annotation or {}).get("valueExpression"), _POLICY_VARIABLES, f"spec.auditAnnotations[{i}].valueExpression")
        param_kind = spec.get("paramKind")
        if param_kind is not None:
            if not (param_kind or {}).get("kind"):
                causes.append(Cause("FieldValueRequired", "Required value", "spec.paramKind.kind"))
            if not (param_kind or {}).get("apiVersion"):
                causes.append(Cause("FieldValueRequired", "Required value", "spec.paramKind.apiVersion"))
        return causes


class PolicyBindingStrategy(StandardStrategy):
    def __init__(self) -> None:
        super().__init__(GROUP, "v1", "ValidatingAdmissionPolicyBinding", tracks_generation=True)

    def default(self, obj: Object) -> None:
        default_binding_spec(obj)

    def validate(self, obj: Object) -> list[Cause]:
        return self._validate(obj)

    def validate_update(self, obj: Object, old: Object) -> list[Cause]:
        return self._validate(obj)

    def _validate(self, obj: Object) -> list[Cause]:
        spec = obj.get("spec") or {}
        causes: list[Cause] = []
        if not spec.get("policyName"):
            causes.append(Cause("FieldValueRequired", "Required value", "spec.policyName"))
        actions = spec.get("validationActions") or []
        if not actions:
            causes.append(Cause("FieldValueRequired", "Required value: at least one validation action is required", "spec.validationActions"))
        for i, action in enumerate(actions):
            if action not in ("Deny", "Warn", "Audit"):
                causes.append(_unsupported(f"spec.validationActions[{i}]", action, ("Audit", "Deny", "Warn")))
        if "Deny" in actions and "Warn" in actions:
            causes.append(Cause("FieldValueInvalid", 'Invalid value: []string{"Deny", "Warn"}: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)', "spec.validationActions"))
        ref = spec.get("paramRef")
        if isinstance(ref, dict):
            if ref.get("name") and ref.get("selector") is not None:
                causes.append(Cause("FieldValueForbidden", "Forbidden: name and selector are mutually exclusive", "spec.paramRef.name"))
            if not ref.get("name") and ref.get("selector") is None:
                causes.append(Cause("FieldValueRequired", "Required value: one of name or selector must be specified", "spec.paramRef"))
            if ref.get("parameterNotFoundAction") not in ("Allow", "Deny"):
                causes.append(_unsupported("spec.paramRef.parameterNotFoundAction", ref.get("parameterNotFoundAction"), ("Allow", "Deny")))
        return causes


def _definition(kind: str, plural: str, strategy: StandardStrategy, **kw: Any) -> ResourceDefinition:
    return ResourceDefinition(
        group=GROUP, version="v1", kind=kind, plural=plural, singular=kind.lower(), namespaced=False,
        categories=("api-extensions",),
        strategy=strategy, openapi_name=f"io.k8s.api.admissionregistration.v1.{kind}", **kw,
    )


DEFINITIONS = [
    _definition("MutatingWebhookConfiguration", "mutatingwebhookconfigurations",
                WebhookConfigurationStrategy("MutatingWebhookConfiguration", mutating=True)),
    _definition("ValidatingAdmissionPolicy", "validatingadmissionpolicies", PolicyStrategy(),
                subresources=frozenset({"status"})),
    _definition("ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings", PolicyBindingStrategy()),
    _definition("ValidatingWebhookConfiguration", "validatingwebhookconfigurations",
                WebhookConfigurationStrategy("ValidatingWebhookConfiguration", mutating=False)),
]
