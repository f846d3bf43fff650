"""rbac.authorization.k8s.io/v1: Roles, ClusterRoles, RoleBindings, ClusterRoleBindings.

Validation as upstream's ``pkg/apis/rbac/validation``: every PolicyRule names
verbs; a resource rule names apiGroups and resources, a non-resource rule
names nonResourceURLs and may not appear in a namespaced Role nor carry
apiGroups/resources/resourceNames; a binding's ``roleRef`` is required, may
not change on update, names a ClusterRole (or, in a RoleBinding, a Role) in
``rbac.authorization.k8s.io``; subjects are User, Group (apiGroup
rbac.authorization.k8s.io) or ServiceAccount (apiGroup "", a namespace).

The escalation and bind checks that need the requesting user are not here
(strategies see no user): ``k8py.apiserver.authz.escalation`` runs them as
store hooks.
"""

from __future__ import annotations

from typing import Any

from k8py.api.errors import Cause
from k8py.apiserver.registry import ResourceDefinition
from k8py.apiserver.resources.strategies import StandardStrategy

__all__ = ["DEFINITIONS", "GROUP", "validate_rules"]

GROUP = "rbac.authorization.k8s.io"
Object = dict[str, Any]


def _required(path: str, detail: str = "") -> Cause:
    return Cause("FieldValueRequired", f"Required value: {detail}" if detail else "Required value", path)


def validate_rules(obj: Object, *, namespaced: bool, path: str = "rules") -> list[Cause]:
    causes: list[Cause] = []
    rules = obj.get("rules")
    if rules is None:
        return causes
    if not isinstance(rules, list):
        return [Cause("FieldValueInvalid", "Invalid value: must be a list of PolicyRules", path)]
    for i, rule in enumerate(rules):
        at = f"{path}[{i}]"
        if not isinstance(rule, dict):
            causes.append(Cause("FieldValueInvalid", "Invalid value: must be a PolicyRule object", at))
            continue
        if not rule.get("verbs"):
            causes.append(_required(f"{at}.verbs", "verbs must contain at least one value"))
        urls = rule.get("nonResourceURLs") or []
        if urls:
            if namespaced:
                causes.append(Cause("FieldValueInvalid", "Invalid value: " + _go_list(urls)
                                    + ": namespaced rules cannot apply to non-resource URLs", f"{at}.nonResourceURLs"))
            if rule.get("apiGroups") or rule.get("resources") or rule.get("resourceNames"):
                causes.append(Cause("FieldValueInvalid", "Invalid value: " + _go_list(urls)
                                    + ": rules cannot apply to both regular resources and non-resource URLs",
                                    f"{at}.nonResourceURLs"))
            continue
        if not rule.get("apiGroups"):
            causes.append(_required(f"{at}.apiGroups", "resource rules must supply at least one api group"))
        if not rule.get("resources"):
            causes.append(_required(f"{at}.resources", "resource rules must supply at least one resource"))
    return causes


def _go_list(values: list[Any]) -> str:
    return "[]string{" + ", ".join(f'"{v}"' for v in values) + "}"


def _validate_role_ref(obj: Object, *, namespaced: bool) -> list[Cause]:
    ref = obj.get("roleRef")
    if not isinstance(ref, dict):
        return [_required("roleRef")]
    causes: list[Cause] = []
    kinds = ("Role", "ClusterRole") if namespaced else ("ClusterRole",)
    group = ref.get("apiGroup") or ""
    if group != GROUP:
        causes.append(Cause("FieldValueNotSupported", f'Unsupported value: "{group}": supported values: "{GROUP}"', "roleRef.apiGroup"))
    kind = ref.get("kind") or ""
    if kind not in kinds:
        causes.append(Cause("FieldValueNotSupported", f'Unsupported value: "{kind}": supported values: '
                            + ", ".join(f'"{k}"' for k in kinds), "roleRef.kind"))
    if not ref.get("name"):
        causes.append(_required("roleRef.name"))
    return causes


def _validate_subjects(obj: Object) -> list[Cause]:
    causes: list[Cause] = []
    for i, subject in enumerate(obj.get("subjects") or []):
        at = f"subjects[{i}]"
        if not isinstance(subject, dict):
            causes.append(Cause("FieldValueInvalid", "Invalid value: must be a Subject object", at))
            continue
        if not subject.get("name"):
            causes.append(_required(f"{at}.name"))
        kind = subject.get("kind") or ""
        group = subject.get("apiGroup") or ""
        if kind == "ServiceAccount":
            if group:
                causes.append(Cause("FieldValueNotSupported", f'Unsupported value: "{group}": supported values: ""', f"{at}.apiGroup"))
            if not subject.get("namespace"):
                causes.append(_required(f"{at}.namespace"))
        elif kind in ("User", "Group"):
            if group != GROUP:
                causes.append(Cause("FieldValueNotSupported", f'Unsupported value: "{group}": supported values: "{GROUP}"',
                                    f"{at}.apiGroup"))
        else:
            causes.append(Cause("FieldValueNotSupported", f'Unsupported value: "{kind}": supported values: '
                                '"ServiceAccount", "User", "Group"', f"{at}.kind"))
    return causes


class RoleStrategy(StandardStrategy):
    def __init__(self, kind: str, *, namespaced: bool) -> None:
        super().__init__(GROUP, "v1", kind)
        self.namespaced = namespaced

    def validate(self, obj: Object) -> list[Cause]:
        return super().validate(obj) + validate_rules(obj, namespaced=self.namespaced)


class BindingStrategy(StandardStrategy):
    def __init__(self, kind: str, *, namespaced: bool) -> None:
        super().__init__(GROUP, "v1", kind)
        self.namespaced = namespaced

    def default(self, obj: Object) -> None:
        super().default(obj)
        for subject in obj.get("subjects") or []:
            if isinstance(subject, dict) and "apiGroup" not in subject and subject.get("kind") in ("User", "Group"):
                subject["apiGroup"] = GROUP  # upstream's SetDefaults_Subject

    def validate(self, obj: Object) -> list[Cause]:
        return super().validate(obj) + _validate_role_ref(obj, namespaced=self.namespaced) + _validate_subjects(obj)

    def validate_update(self, obj: Object, old: Object) -> list[Cause]:
        causes = self.validate(obj)
        if obj.get("roleRef") != old.get("roleRef"):
            causes.append(Cause("FieldValueInvalid", "Invalid value: " + _ref_repr(obj.get("roleRef"))
                                + ": cannot change roleRef", "roleRef"))
        return causes


def _ref_repr(ref: Any) -> str:
    if not isinstance(ref, dict):
        return "null"
    return (f'rbac.RoleRef{{APIGroup:"{ref.get("apiGroup", "")}", Kind:"{ref.get("kind", "")}", '
            f'Name:"{ref.get("name", "")}"}}')


def _definition(kind: str, plural: str, *, namespaced: bool, strategy: StandardStrategy) -> ResourceDefinition:
    return ResourceDefinition(
        group=GROUP, version="v1", kind=kind, plural=plural, singular=kind.lower(), namespaced=namespaced,
        strategy=strategy, openapi_name=f"io.k8s.api.rbac.v1.{kind}",
    )


DEFINITIONS = [
    _definition("ClusterRoleBinding", "clusterrolebindings", namespaced=False,
                strategy=BindingStrategy("ClusterRoleBinding", namespaced=False)),
    _definition("ClusterRole", "clusterroles", namespaced=False, strategy=RoleStrategy("ClusterRole", namespaced=False)),
    _definition("RoleBinding", "rolebindings", namespaced=True, strategy=BindingStrategy("RoleBinding", namespaced=True)),
    _definition("Role", "roles", namespaced=True, strategy=RoleStrategy("Role", namespaced=True)),
]
