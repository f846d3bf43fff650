"""Evaluating ``x-kubernetes-validations`` on every write of a custom resource.

Upstream's ``schema/cel/validation.go`` is the spec:

* each schema node's rules run with ``self`` bound to the value at that node
  (at the root: the object, its ``metadata`` cut to ``name`` and
  ``generateName``); a null or absent value runs no rules;
* a rule that reads ``oldSelf`` (a *transition rule*) runs only on update and
  only where the old value correlates: the same property of an object, the
  same key of a map, the item with the same keys of an
  ``x-kubernetes-list-type: map`` list (never the items of other lists) -
  unless ``optionalOldSelf: true``, which runs it always with ``oldSelf`` an
  optional;
* a rule that is false gives ``<path>: Invalid value: "<type>": <message>``
  (``message``, else ``messageExpression``'s value, else ``failed rule:
  <rule>``; ``reason`` turns it into Forbidden, Required or Duplicate;
  ``fieldPath`` is appended to the path, which is ``<nil>`` at the root);
  a rule that fails to evaluate gives ``<error> evaluating rule: <rule>``;
* errors of a rule without ``oldSelf`` on a value equal to its old value are
  dropped (ratcheting: upstream turns them into warnings);
* values are what the rule's types say (:mod:`.cel_values`): a ``date-time``
  string is a timestamp, ``foo-bar`` is ``self.foo__dash__bar``;
* cost: each evaluation is limited by ``PER_CALL_LIMIT`` and all of one
  object's by ``RUNTIME_BUDGET``; past either, validation stops with
  upstream's message.

:class:`RuleTree` is built once per schema (rules compiled, nodes without
rules below them pruned), so a schema without rules costs nothing on writes.
"""

from __future__ import annotations

from typing import Any

from k8py.api.errors import Cause
from k8py.apiserver import cel
from k8py.apiserver.validation.cel_compile import RULE_VARIABLES, CompiledRule, compile_rule
from k8py.apiserver.validation.cel_values import converter
from k8py.apiserver.validation.field import duplicate, forbidden, invalid, required

__all__ = ["RuleTree", "build_rule_tree"]

Schema = dict[str, Any]
_ROOT = "<nil>"
_MAX_MESSAGE = 5000


class RuleTree:
    """A schema node's compiled rules and the children that hold rules."""

    __slots__ = ("type", "rules", "properties", "items", "additional", "all_of", "list_keys", "correlates_keys",
                 "convert")

    def __init__(self, schema: Schema) -> None:
        self.type = str(schema.get("type") or "")
        raw = schema.get("x-kubernetes-validations")
        self.rules: list[CompiledRule] = [compile_rule(r, schema) for r in raw if isinstance(r, dict)] \
            if isinstance(raw, list) else []
        #: the values as the rules' types say (timestamps, durations, bytes, escaped names); None: as stored
        self.convert = converter(schema) if self.rules else None
        self.properties: dict[str, RuleTree] = {}
        for name, sub in (schema.get("properties") or {}).items():
            tree = build_rule_tree(sub)
            if tree is not None:
                self.properties[name] = tree
        self.items = build_rule_tree(schema["items"]) if isinstance(schema.get("items"), dict) else None
        additional = schema.get("additionalProperties")
        self.additional = build_rule_tree(additional) if isinstance(additional, dict) else None
        self.all_of = [t for t in (build_rule_tree(s) for s in schema.get("allOf") or []) if t is not None]
        keys = schema.get("x-kubernetes-map-keys") if schema.get("x-kubernetes-list-type") == "map" else None
        self.list_keys: tuple[str, ...] | None = tuple(keys) if isinstance(keys, list) else None
        self.correlates_keys = schema.get("x-kubernetes-map-type") in (None, "granular", "atomic")

    @property
    def empty(self) -> bool:
        return not (self.rules or self.properties or self.items or self.additional or self.all_of)

    def validate(self, obj: Any, old: Any) -> list[Cause]:
        """The causes for ``obj`` (``old``: the stored object on update, else None)."""
        state = _State()
        self._validate(_root_view(obj), _root_view(old) if old is not None else None, "", state,
                       correlated=old is not None, ratchet=old is not None and obj == old)
        return state.causes

    def _validate(self, value: Any, old: Any, path: str, state: _State, *, correlated: bool, ratchet: bool) -> None:
        if value is None or state.stopped:
            return
        if self.rules:
            self._run_rules(value, old if correlated else None, path, state, ratchet)
        for tree in self.all_of:
            tree._validate(value, old, path, state, correlated=correlated, ratchet=False)
        if isinstance(value, dict):
            old_map = old if isinstance(old, dict) and self.correlates_keys else {}
            for key, sub in value.items():
                tree = self.properties.get(key) or self.additional
                if tree is None or state.stopped:
                    continue
                child = (f"{path}.{key}" if path else key) if key in self.properties else f"{path}[{key}]"
                old_sub = old_map.get(key) if correlated else None
                has_old = correlated and key in old_map
                tree._validate(sub, old_sub, child, state, correlated=has_old,
                               ratchet=(has_old and sub == old_sub) if has_old else ratchet)
        elif isinstance(value, list) and self.items is not None:
            olds = self._old_items(old if correlated else None)
            for i, item in enumerate(value):
                if state.stopped:
                    return
                old_item = olds.get(self._key(item)) if olds is not None else None
                has_old = old_item is not None
                self.items._validate(item, old_item, f"{path}[{i}]", state, correlated=has_old,
                                     ratchet=(item == old_item) if has_old else ratchet)

    def _key(self, item: Any) -> Any:
        if self.list_keys is None or not isinstance(item, dict):
            return None
        return tuple(repr(item.get(k)) for k in self.list_keys)

    def _old_items(self, old: Any) -> dict[Any, Any] | None:
        if self.list_keys is None or not isinstance(old, list):
            return None
        return {self._key(item): item for item in old if isinstance(item, dict)}

    def _run_rules(self, value: Any, old: Any, path: str, state: _State, ratchet: bool) -> None:
        shown = path or _ROOT
        if state.remaining <= 0:
            state.stop(invalid(shown, self.type, "validation failed due to running out of cost budget, "
                                                 "no further validation rules will be run"))
            return
        if self.convert is not None:
            value, old = self.convert(value), self.convert(old) if old is not None else None
        bound = cel.Activation({"self": value, "oldSelf": old}, RULE_VARIABLES)
        for compiled in self.rules:
            if compiled.error or compiled.program is None:
                state.causes.append(invalid(shown, self.type, f"rule compile error: {compiled.error}"))
                continue
            if compiled.uses_old_self and old is None and not compiled.optional_old_self:
                continue
            activation: Any = bound
            if compiled.optional_old_self:
                activation = {"self": value, "k8pyOldSelfValue": old, "k8pyHasOldSelf": old is not None}
            try:
                result, spent = compiled.program.evaluate_with_cost(activation)
            except cel.CostLimitError as exc:
                state.stop(invalid(shown, self.type, f"'{exc}': no further validation rules will be run due to "
                                                     f"call cost exceeds limit for rule: {compiled.error_string}"))
                return
            except cel.EvaluationError as exc:
                if str(exc).startswith("no such overload"):
                    detail = (f"'{exc}': call arguments did not match a supported operator, function or macro "
                              f"signature for rule: {compiled.error_string}")
                else:
                    detail = f"{exc} evaluating rule: {compiled.error_string}"
                state.causes.append(invalid(shown, self.type, detail))
                continue
            if spent > state.remaining:
                state.stop(invalid(shown, self.type, "validation failed due to running out of cost budget, "
                                                     "no further validation rules will be run"))
                return
            state.remaining -= spent
            if result is True:
                continue
            if ratchet and not compiled.uses_old_self:
                continue  # unchanged since it was stored: upstream only warns
            target = shown if not compiled.field_path else (
                f"{path}.{compiled.field_path}" if path else compiled.field_path)
            detail = self._message(compiled, bound, state) or compiled.message_or_default
            state.causes.append(_cause(compiled.rule.get("reason"), target, self.type, detail))

    @staticmethod
    def _message(compiled: CompiledRule, activation: cel.Activation, state: _State) -> str:
        if compiled.message_program is None:
            return ""
        try:
            message, spent = compiled.message_program.evaluate_with_cost(activation)
        except cel.EvaluationError:
            return ""
        state.remaining -= spent
        if not isinstance(message, str):
            return ""
        message = message.strip()
        if not message or "\n" in message or len(message) > _MAX_MESSAGE:
            return ""
        return message


class _State:
    __slots__ = ("causes", "remaining", "stopped")

    def __init__(self) -> None:
        self.causes: list[Cause] = []
        self.remaining = cel.RUNTIME_BUDGET
        self.stopped = False

    def stop(self, cause: Cause) -> None:
        self.causes.append(cause)
        self.stopped = True


def _cause(reason: Any, path: str, type_name: str, detail: str) -> Cause:
    if reason == "FieldValueForbidden":
        return forbidden(path, detail)
    if reason == "FieldValueRequired":
        return required(path, detail)
    if reason == "FieldValueDuplicate":
        return duplicate(path, type_name)
    return invalid(path, type_name, detail)


def _root_view(obj: Any) -> Any:
    """The object as root rules see it: ``metadata`` holds only ``name`` and ``generateName``."""
    if not isinstance(obj, dict):
        return obj
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return obj
    return {**obj, "metadata": {k: meta[k] for k in ("name", "generateName") if k in meta}}


def build_rule_tree(schema: Any) -> RuleTree | None:
    """The rules of ``schema`` (None when it has none anywhere)."""
    if not isinstance(schema, dict):
        return None
    tree = RuleTree(schema)
    return None if tree.empty else tree
