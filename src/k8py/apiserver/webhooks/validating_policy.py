"""The ValidatingAdmissionPolicy plugin: CEL validations bound to requests.

For each binding (by name) whose policy exists, as upstream's
``validatingadmissionpolicy`` plugin:

1. *match*: the policy's ``matchConstraints`` (a request matched through
   an equivalent version, ``matchPolicy: Equivalent``, is evaluated with its
   objects converted to that version) and, when set, the binding's
   ``matchResources`` (resourceRules with resourceNames, excludeResourceRules,
   namespace and object selectors, matchPolicy), then the policy's
   matchConditions;
2. *params*: with a ``paramKind``, the binding's ``paramRef`` names one
   object or selects several (in its namespace, else the request's), read
   from the watch cache; none found obeys ``parameterNotFoundAction``
   (``Deny``: the request is refused); with several, each is validated;
3. *evaluate*: ``variables`` in order (``variables.<name>``), then every
   validation over ``object``, ``oldObject``, ``request``, ``params``,
   ``namespaceObject``, ``variables``, ``authorizer`` (checks decided by the
   server's authorizer, :mod:`k8py.apiserver.cel.authorizer`); a false one fails with its
   ``message``, its ``messageExpression``'s value or ``failed expression:
   <expression>``; an expression that errors (or did not compile) fails
   under ``failurePolicy: Fail`` and is skipped under ``Ignore``;
4. *act* as the binding's ``validationActions`` say: ``Deny`` refuses
   the request with upstream's Status (``<resource> "<name>" is forbidden:
   ValidatingAdmissionPolicy '<p>' with binding '<b>' denied request: …``,
   reason from the validation, default ``Invalid`` 422), ``Warn`` adds a
   ``Warning``, ``Audit`` adds the
   ``validation.policy.admission.k8s.io/validation_failure`` annotation.
   ``auditAnnotations`` add ``<policy>/<key>`` annotations.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

import orjson

from k8py.api.errors import Cause, StatusError
from k8py.api.selectors import label_selector_from_dict
from k8py.apiserver.registry import Registry
from k8py.apiserver.watch.cacher import Cacher
from k8py.apiserver.webhooks.attributes import GroupVersionKind, GroupVersionResource, RequestAttributes
from k8py.apiserver.webhooks.conditions import activation, evaluate
from k8py.apiserver.webhooks.dispatcher import Convert
from k8py.apiserver.webhooks.policy_source import BoundPolicy, CompiledPolicy, Expression, PolicySource
from k8py.apiserver.webhooks.rules import is_exempt, namespace_selector_matches, object_selector_matches, rules_match

if TYPE_CHECKING:
    from k8py.apiserver.cel.authorizer import Authorize  # (the CEL engine loads on first use: k8py.apiserver.cel)

__all__ = ["ValidatingPolicyPlugin"]

log = logging.getLogger(__name__)
Object = dict[str, Any]

_REASON_CODES = {"Unauthorized": 401, "Forbidden": 403, "Invalid": 422, "RequestEntityTooLarge": 413}
AUDIT_KEY = "validation.policy.admission.k8s.io/validation_failure"


class _EvaluationFailed(Exception):
    """An expression errored or did not compile (its message as upstream words it)."""


class ValidatingPolicyPlugin:
    name = "ValidatingAdmissionPolicy"

    def __init__(self, source: PolicySource, registry: Registry, cacher: Cacher, *,
                 namespace_labels: Callable[[str], Mapping[str, str] | None],
                 equivalents: Callable[[str, str], Iterable[str]],
                 authorize: Callable[[], Authorize | None] = lambda: None,
                 convert: Convert | None = None,
                 kind_of: Callable[[str, str, str], str | None] = lambda group, version, resource: None) -> None:
        self.source = source
        #: the authorizer library's decisions (a getter: the server's authorizer is built after its plugins)
        self.authorize = authorize
        #: the object into the version matchConstraints matched (``matchPolicy: Equivalent``)
        self.convert = convert
        self.kind_of = kind_of
        self.registry = registry
        self.cacher = cacher
        self.namespace_labels = namespace_labels
        self.equivalents = equivalents

    def handles(self, operation: str) -> bool:
        return operation in ("CREATE", "UPDATE", "DELETE", "CONNECT")

    async def validate(self, attrs: RequestAttributes) -> None:
        bound = self.source.bound()
        if not bound or is_exempt(attrs):
            return
        authorize = self.authorize()
        for entry in bound:
            await self._validate_one(entry, attrs, authorize)

    # -- matching -------------------------------------------------------------

    def _matches(self, resources: Mapping[str, Any] | None, attrs: RequestAttributes) -> bool:
        if not resources:
            return True
        policy = resources.get("matchPolicy") or "Equivalent"
        # a binding's matchResources without resourceRules narrows nothing by resource (upstream)
        if resources.get("resourceRules") and not _named_rules_match(resources["resourceRules"], attrs, policy, self.equivalents):
            return False
        if resources.get("excludeResourceRules") and _named_rules_match(resources["excludeResourceRules"], attrs, policy, self.equivalents):
            return False
        return (namespace_selector_matches(resources.get("namespaceSelector"), attrs, self.namespace_labels)
                and object_selector_matches(resources.get("objectSelector"), attrs))

    async def _versioned(self, constraints: Mapping[str, Any] | None, attrs: RequestAttributes) -> dict[str, Any]:
        """``object``/``oldObject`` and the request's ``kind``/``resource`` in the version the
        policy's rules matched, when that is another one ({} when it is the request's)."""
        rules = (constraints or {}).get("resourceRules")
        if not rules or self.convert is None:
            return {}
        policy = (constraints or {}).get("matchPolicy") or "Equivalent"
        matched = rules_match(rules, attrs, match_policy=policy, equivalents=self.equivalents)
        group, version, resource = attrs.resource
        if matched is None or matched[1] == version:
            return {}
        to = matched[1]
        kind = self.kind_of(group, to, resource) or attrs.kind[2]
        return {"object": await self.convert(attrs.object, group, resource, version, to),
                "oldObject": await self.convert(attrs.old_object, group, resource, version, to),
                "kind": GroupVersionKind(group, to, kind), "resource": GroupVersionResource(group, to, resource)}

    # -- one binding ----------------------------------------------------------

    async def _validate_one(self, entry: BoundPolicy, attrs: RequestAttributes, authorize: Authorize | None) -> None:
        policy = entry.policy
        spec = policy.spec
        if not self._matches(spec.get("matchConstraints"), attrs) or not self._matches(entry.binding.get("matchResources"), attrs):
            return
        fail_closed = (spec.get("failurePolicy") or "Fail") == "Fail"
        actions = list(entry.binding.get("validationActions") or ["Deny"])
        namespace_object = self._namespace_object(attrs)
        versioned = await self._versioned(spec.get("matchConstraints"), attrs)
        try:
            params_list = self._params(policy, entry, attrs)
        except _EvaluationFailed as failed:
            if fail_closed:
                self._act(entry, attrs, ["Deny"] if "Deny" in actions else actions, str(failed), "Invalid", -1)
            return
        if params_list is None:
            return  # no params, parameterNotFoundAction: Allow
        for params in params_list:
            base = activation(attrs, params=params, namespaceObject=namespace_object, **versioned)
            if policy.conditions and not await self._conditions_match(policy, base, fail_closed, entry, attrs, actions,
                                                                      authorize):
                continue
            base["variables"] = await self._variables(policy, base, authorize)
            for index, (validation, expression, message_expression) in enumerate(policy.validations):
                try:
                    ok = await _evaluate(expression, base, authorize)
                    if ok is True:
                        continue
                    if ok is not False:
                        raise _EvaluationFailed(f"expression '{expression.source}' resulted in error: "
                                                f"validation failed due to an unexpected type: {type(ok).__name__}")
                except _EvaluationFailed as failed:
                    if fail_closed:
                        self._act(entry, attrs, actions, str(failed), "Invalid", index)
                    continue
                message = await self._message(validation, expression, message_expression, base, authorize)
                self._act(entry, attrs, actions, message, str(validation.get("reason") or "Invalid"), index)
            for key, value_expression in policy.audit_annotations:
                try:
                    value = await _evaluate(value_expression, base, authorize)
                except _EvaluationFailed:
                    continue
                if value is not None:
                    attrs.add_audit_annotation(f"{policy.name}/{key}", str(value))

    async def _conditions_match(self, policy: CompiledPolicy, base: Mapping[str, Any], fail_closed: bool,
                                entry: BoundPolicy, attrs: RequestAttributes, actions: list[str],
                                authorize: Authorize | None) -> bool:
        errors = []
        for name, expression in policy.conditions:
            try:
                if await _evaluate(expression, base, authorize) is not True:
                    return False
            except _EvaluationFailed as failed:
                errors.append(f"{name}: {failed}")
        if errors and fail_closed:
            self._act(entry, attrs, actions, "failed to evaluate match conditions: " + "; ".join(errors), "Invalid", -1)
        return not errors

    @staticmethod
    async def _variables(policy: CompiledPolicy, base: Mapping[str, Any], authorize: Authorize | None) -> dict[str, Any]:
        variables: dict[str, Any] = {}
        for name, expression in policy.variables:
            try:
                variables[name] = await _evaluate(expression, {**base, "variables": variables}, authorize)
            except _EvaluationFailed:
                continue  # an expression that uses it fails with "no such key", as a lazy cel-go variable would
        return variables

    @staticmethod
    async def _message(validation: Mapping[str, Any], expression: Expression, message_expression: Expression | None,
                       base: Mapping[str, Any], authorize: Authorize | None) -> str:
        if message_expression is not None:
            try:
                value = await _evaluate(message_expression, base, authorize)
                if isinstance(value, str) and value.strip() and "\n" not in value:
                    return value.strip()
            except _EvaluationFailed as failed:
                log.debug("messageExpression failed", extra={"error": str(failed)})
        if validation.get("message"):
            return str(validation["message"])
        return f"failed expression: {expression.source.strip()}"

    # -- params and namespace -------------------------------------------------

    def _namespace_object(self, attrs: RequestAttributes) -> Object | None:
        if not attrs.namespace:
            return None
        definition = self.registry.get("", "v1", "namespaces")
        cached = self.cacher.cache_for(definition).objects.get(definition.key("", attrs.namespace)) if definition else None
        return orjson.loads(cached.data) if cached is not None else None

    def _params(self, policy: CompiledPolicy, entry: BoundPolicy, attrs: RequestAttributes) -> list[Object | None] | None:
        kind = policy.spec.get("paramKind")
        ref = entry.binding.get("paramRef")
        if not kind:
            return [None]
        if not ref:
            raise _EvaluationFailed(f"failed to configure binding: paramRef is required when the policy '{policy.name}' has a paramKind")
        group, _, version = str(kind.get("apiVersion", "")).rpartition("/")
        definition = self.registry.by_kind(group, version, str(kind.get("kind", "")))
        if definition is None:
            raise _EvaluationFailed(f"failed to configure policy: failed to find resource referenced by paramKind: "
                                    f"'{kind.get('apiVersion', '')}, Kind={kind.get('kind', '')}'")
        namespace = ""
        if definition.namespaced:
            namespace = ref.get("namespace") or attrs.namespace
            if not namespace:
                raise _EvaluationFailed("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources")
        cache = self.cacher.cache_for(definition)
        if ref.get("name"):
            cached = cache.objects.get(definition.key(namespace, ref["name"]))
            found = [orjson.loads(cached.data)] if cached is not None else []
        else:
            selector = label_selector_from_dict(ref.get("selector") or {})
            found = [orjson.loads(c.data) for c in cache.candidates(namespace) if selector.matches(c.labels)]
        if found:
            return found
        if (ref.get("parameterNotFoundAction") or "Deny") == "Deny":
            raise _EvaluationFailed("no params found for policy binding with `Deny` parameterNotFoundAction")
        return None

    # -- the decision ---------------------------------------------------------

    def _act(self, entry: BoundPolicy, attrs: RequestAttributes, actions: list[str], message: str, reason: str,
             index: int) -> None:
        text = f"ValidatingAdmissionPolicy '{entry.policy.name}' with binding '{entry.binding_name}' denied request: {message}"
        if "Warn" in actions:
            attrs.add_warning(f"Validation failed for ValidatingAdmissionPolicy '{entry.policy.name}' with binding "
                              f"'{entry.binding_name}': {message}")
        if "Audit" in actions:
            attrs.add_audit_annotation(AUDIT_KEY, orjson.dumps([{
                "message": message, "policy": entry.policy.name, "binding": entry.binding_name,
                "expressionIndex": index, "validationActions": actions}]).decode())
        if "Deny" in actions:
            raise _forbidden(attrs, text, reason)


def _forbidden(attrs: RequestAttributes, text: str, reason: str) -> StatusError:
    """upstream's ``admission.NewForbidden`` with the validation's reason and code."""
    group, _, resource = attrs.resource
    name = attrs.name or ((attrs.object or {}).get("metadata") or {}).get("name") or ""
    qualified = f"{resource}.{group}" if group else resource
    return StatusError(f'{qualified} "{name}" is forbidden: {text}', code=_REASON_CODES.get(reason, 422), reason=reason,
                       name=name, group=group, kind=resource, causes=[Cause("", text)])


async def _evaluate(expression: Expression, variables: Mapping[str, Any], authorize: Authorize | None) -> Any:
    if expression.program is None:
        raise _EvaluationFailed(f"compilation failed: {expression.error}")
    try:
        return await evaluate(expression.program, variables, authorize)
    except Exception as err:  # the expression's own failure (no such key, overload, cost), not ours
        raise _EvaluationFailed(f"expression '{expression.source}' resulted in error: {err}") from None


def _named_rules_match(rules: Any, attrs: RequestAttributes, match_policy: str,
                       equivalents: Callable[[str, str], Iterable[str]]) -> bool:
    for rule in rules or []:
        names = rule.get("resourceNames") or []
        if names and attrs.name not in names:
            continue
        if rules_match([rule], attrs, match_policy=match_policy, equivalents=equivalents) is not None:
            return True
    return False
