"""The MutatingAdmissionPolicy plugin (``admissionregistration.k8s.io/v1alpha1``, feature gate
``MutatingAdmissionPolicy``): CEL mutations bound to requests.

For each MutatingAdmissionPolicyBinding whose policy exists, in the mutating
phase and before the mutating webhooks (upstream's slot):

1. *match* and *params* exactly as ValidatingAdmissionPolicy
   (:mod:`.validating_policy`: matchConstraints with matchPolicy, the
   binding's matchResources, paramKind/paramRef, matchConditions), the object
   converted to the matched version;
2. *variables*, then each of ``spec.mutations`` in order, each seeing the
   object as the previous one left it:

   * ``patchType: ApplyConfiguration``: ``applyConfiguration.expression``
     gives a partial object (``Object{spec: Object.spec{replicas: 3}}``,
     :mod:`k8py.apiserver.cel.mutation`) merged into the object as
     server-side apply merges (granular maps, ``map``/``set`` lists by key,
     atomic lists whole; the resource's schema decides);
   * ``patchType: JSONPatch``: ``jsonPatch.expression`` gives a list of
     ``JSONPatch{op, path, value, from}``, applied as RFC 6902;

3. the result, back in the request's version, replaces the request's object.

Reinvocation as upstream's ``reinvocationPolicy: IfNeeded``: a policy marked
so runs once more, in the chain's reinvocation pass
(:mod:`k8py.apiserver.admission.reinvocation`, after every mutating plugin,
webhooks included, has run), when the object changed after it ran — by a
later policy, or by anything after this plugin, a mutating webhook say; never
a third time. Called on its own (no chain), the plugin runs that second pass
itself at once.

An expression that errors (or did not compile), or a mutation whose result
cannot be applied, refuses the request under ``failurePolicy: Fail`` (500
``Internal error occurred: ...``) and is skipped under ``Ignore``.

Limits as upstream (:mod:`.mutation_limits`): an ApplyConfiguration may not
set anything atomic (``may not mutate atomic arrays, maps or structs:
.spec.selector``), and the mutations of one evaluation share the runtime cost
budget (10,000,000; each expression at most 1,000,000).

(v1alpha1 MutatingAdmissionPolicies have no ``status``: there is no type
checking to report, unlike ValidatingAdmissionPolicies.)
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from k8py.api.errors import Cause, InternalError, StatusError
from k8py.api.patch import schema_walk, structured
from k8py.api.patch.json_patch import apply_json_patch
from k8py.apiserver.admission.reinvocation import PluginState, context_of
from k8py.apiserver.cel.mutation import restore_positions, rewrite
from k8py.apiserver.registry import Registry
from k8py.apiserver.watch.cacher import Cacher
from k8py.apiserver.webhooks.attributes import RequestAttributes
from k8py.apiserver.webhooks.conditions import ExpressionCompiler, activation
from k8py.apiserver.webhooks.dispatcher import Convert
from k8py.apiserver.webhooks.mutation_limits import ATOMIC_MESSAGE, CostBudget, atomic_paths
from k8py.apiserver.webhooks.policy_source import BoundPolicy, CompiledPolicy, Expression, Object, PolicySource
from k8py.apiserver.webhooks.rules import is_exempt
from k8py.apiserver.webhooks.validating_policy import ValidatingPolicyPlugin, _EvaluationFailed

if TYPE_CHECKING:
    from k8py.apiserver.cel.authorizer import Authorize  # (the CEL engine loads on first use: k8py.apiserver.cel)

__all__ = ["MutatingPolicyPlugin", "MutatingPolicySource", "FEATURE_GATE", "VERSION"]

log = logging.getLogger(__name__)

FEATURE_GATE = "MutatingAdmissionPolicy"
VERSION = "v1alpha1"
PATCH_TYPES = ("ApplyConfiguration", "JSONPatch")


class MutatingPolicySource(PolicySource):
    """The MutatingAdmissionPolicies and their bindings, compiled once per resourceVersion."""

    version = VERSION
    policies = "mutatingadmissionpolicies"
    bindings = "mutatingadmissionpolicybindings"

    def _compile(self, obj: Object) -> CompiledPolicy:
        policy = super()._compile(obj)
        for mutation in policy.spec.get("mutations") or []:
            patch_type = str(mutation.get("patchType") or "")
            holder = mutation.get("applyConfiguration" if patch_type == "ApplyConfiguration" else "jsonPatch") or {}
            source = str(holder.get("expression") or "")
            rewritten, origins = rewrite(source)
            expression = self._expression(source, rewritten)
            if expression.error:  # at its place in the expression as written
                expression = Expression(source, None, restore_positions(expression.error, source, rewritten, origins))
            policy.mutations.append((patch_type, expression))
        return policy


class _Matching(ValidatingPolicyPlugin):
    """ValidatingAdmissionPolicy's matching, params and variables, failing as a mutating policy fails."""

    def _act(self, entry: BoundPolicy, attrs: RequestAttributes, actions: list[str], message: str, reason: str,
             index: int) -> None:
        raise _failed(entry, message)


async def _evaluate_within(expression: Expression, variables: Mapping[str, Any], authorize: Authorize | None,
                           budget: CostBudget) -> Any:
    """A mutation's value, its cost taken from ``budget`` (upstream's runtime cost budget)."""
    program = expression.program
    if program is None:
        raise _EvaluationFailed(f"compilation failed: {expression.error}")
    from k8py.apiserver.cel import authorizer as cel_authorizer

    try:
        value, cost = await cel_authorizer.evaluate(lambda: program.evaluate_with_cost(variables, cost_limit=budget.limit),
                                                    authorize)
    except Exception as err:  # the expression's own failure (no such key, overload, cost), not ours
        raise _EvaluationFailed(f"expression '{expression.source}' resulted in error: {err}") from None
    budget.spend(cost)
    return value


def _if_needed(entry: BoundPolicy) -> bool:
    return (entry.policy.spec.get("reinvocationPolicy") or "Never") == "IfNeeded"


def _failed(entry: BoundPolicy, message: str) -> StatusError:
    text = (f"MutatingAdmissionPolicy '{entry.policy.name}' with binding '{entry.binding_name}' "
            f"failed: {message}")
    return InternalError(f"Internal error occurred: {text}", causes=[Cause("", text)])


class MutatingPolicyPlugin:
    name = "MutatingAdmissionPolicy"

    def __init__(self, source: MutatingPolicySource, registry: Registry, cacher: Cacher, *,
                 namespace_labels: Callable[[str], Mapping[str, str] | None],
                 equivalents: Callable[[str, str], Iterable[str]],
                 authorize: Callable[[], Authorize | None] = lambda: None,
                 convert: Convert | None = None,
                 kind_of: Callable[[str, str, str], str | None] = lambda group, version, resource: None) -> None:
        self.source = source
        self.registry = registry
        self.authorize = authorize
        self.matching = _Matching(source, registry, cacher, namespace_labels=namespace_labels,
                                  equivalents=equivalents, authorize=authorize, convert=convert, kind_of=kind_of)
        self.convert = convert

    def handles(self, operation: str) -> bool:
        return operation in ("CREATE", "UPDATE")

    async def admit(self, attrs: RequestAttributes) -> None:
        bound = self.source.bound()
        if not bound or is_exempt(attrs) or attrs.object is None:
            return
        authorize = self.authorize()
        context = context_of(attrs)
        state = context.plugin(self.name) if context is not None else PluginState()
        changes = 0
        for entry in bound:
            changed = await self._mutate_one(entry, attrs, authorize)
            if changed:  # what the IfNeeded ones before it judged has changed: they run again
                changes += 1
                state.pending += [name for name in state.invoked if name not in state.pending]
                state.invoked = []
            if changed is not None and _if_needed(entry):
                state.invoked.append(entry.binding_name)
        state.finished(attrs.object)
        if context is None:  # called on its own: no reinvocation pass will come, run them now
            await self.reinvoke(attrs, state)
        elif changes:
            context.should_reinvoke = True

    async def reinvoke(self, attrs: RequestAttributes, state: PluginState | None = None) -> None:
        """The second pass: the IfNeeded policies that ran before a change, once more (and all of them
        if someone after this plugin changed the object)."""
        context = context_of(attrs)
        if state is None:
            if context is None:
                return
            state = context.plugin(self.name)
        if attrs.object is None:
            return
        if state.changed_since(attrs.object):
            state.pending += [name for name in state.invoked if name not in state.pending]
        pending, state.pending, state.invoked = state.pending, [], []
        if not pending:
            return
        authorize = self.authorize()
        for entry in self.source.bound():
            if entry.binding_name in pending:
                await self._mutate_one(entry, attrs, authorize)
        state.finished(attrs.object)

    async def _mutate_one(self, entry: BoundPolicy, attrs: RequestAttributes, authorize: Authorize | None) -> bool | None:
        """True if the policy changed the object, False if not, None if it does not apply to the request."""
        policy, matching = entry.policy, self.matching
        spec = policy.spec
        if not matching._matches(spec.get("matchConstraints"), attrs) \
                or not matching._matches(entry.binding.get("matchResources"), attrs):
            return None
        fail_closed = (spec.get("failurePolicy") or "Fail") == "Fail"
        try:
            params_list = matching._params(policy, entry, attrs)
        except _EvaluationFailed as failed:
            if fail_closed:
                raise _failed(entry, str(failed)) from None
            return None
        if params_list is None:
            return None
        versioned = await matching._versioned(spec.get("matchConstraints"), attrs)
        namespace_object = matching._namespace_object(attrs)
        obj: Object = versioned.get("object", attrs.object)
        for params in params_list:
            base = activation(attrs, params=params, namespaceObject=namespace_object, **{**versioned, "object": obj})
            if policy.conditions and not await matching._conditions_match(policy, base, fail_closed, entry, attrs,
                                                                          ["Deny"], authorize):
                continue
            base["variables"] = await matching._variables(policy, base, authorize)
            budget = CostBudget()  # per (policy, binding, param) evaluation
            for patch_type, expression in policy.mutations:
                try:
                    value = await _evaluate_within(expression, {**base, "object": obj}, authorize, budget)
                    obj = self._apply(patch_type, obj, value, attrs, versioned)
                except _EvaluationFailed as failed:
                    if fail_closed:
                        raise _failed(entry, str(failed)) from None
                    log.info("mutation skipped (failurePolicy Ignore)", extra={"policy": policy.name})
        if versioned and self.convert is not None:
            group, version, resource = attrs.resource
            obj = await self.convert(obj, group, resource, versioned["resource"].version, version) or obj
        if obj != attrs.object and attrs.object is not None:
            attrs.object.clear()
            attrs.object.update(obj)  # in place: later plugins and the store see it
            return True
        return False

    def _apply(self, patch_type: str, obj: Object, value: Any, attrs: RequestAttributes,
               versioned: Mapping[str, Any]) -> Object:
        if patch_type == "ApplyConfiguration":
            if not isinstance(value, dict):
                raise _EvaluationFailed(f"ApplyConfiguration expression must evaluate to an object, not "
                                        f"{type(value).__name__}")
            group, version, resource = versioned.get("resource") or attrs.resource
            definition = self.registry.get(group, version, resource)
            schema = schema_walk.root_schema(definition.openapi_name) if definition is not None else None
            atomics = atomic_paths(value, schema)
            if atomics:
                raise _EvaluationFailed("error applying patch: " + ATOMIC_MESSAGE + ", ".join(atomics))
            merged = structured.merge(obj, value, schema)
            return merged if isinstance(merged, dict) else obj
        if patch_type == "JSONPatch":
            if not isinstance(value, list):
                raise _EvaluationFailed(f"JSONPatch expression must evaluate to a list of JSONPatch, not "
                                        f"{type(value).__name__}")
            try:
                patched = apply_json_patch(obj, value)
            except StatusError as err:
                raise _EvaluationFailed(f"JSON Patch: {err.message}") from None
            if not isinstance(patched, dict):
                raise _EvaluationFailed("JSON Patch: the patched object is not an object")
            return patched
        raise _EvaluationFailed(f"unsupported patchType {patch_type!r} (one of {', '.join(PATCH_TYPES)})")


def build_mutating_policy_plugin(registry: Registry, cacher: Cacher, compiler: ExpressionCompiler | None,
                                 **lookups: Any) -> MutatingPolicyPlugin:
    return MutatingPolicyPlugin(MutatingPolicySource(registry, cacher, compiler), registry, cacher, **lookups)
