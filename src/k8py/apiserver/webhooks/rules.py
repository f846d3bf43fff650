"""Does a webhook or a policy apply to a request? Rules, scope, selectors.

Pure functions over JSON-shaped configuration, as upstream's
``admission/plugin/webhook/predicates``:

- a *rule* (``RuleWithOperations``) matches when the operation, the group,
  the version and the resource (``pods``, ``pods/status``, ``*``,
  ``*/status``, ``pods/*``, ``*/*``) all match, and the scope: ``Cluster``
  only cluster-scoped resources, ``Namespaced`` only namespaced ones (a
  Namespace itself counts as cluster-scoped), ``*`` both;
- ``matchPolicy: Equivalent`` also matches the same resource through another
  served version of its group (the request is then described in the
  matched version, and the dispatchers send the object converted to it);
- the ``namespaceSelector`` is checked against the labels of the request's
  namespace (for a Namespace: the object's own labels); a cluster-scoped
  object other than a Namespace always matches;
- the ``objectSelector`` against the labels of the new or the old object
  (either matching is enough, as upstream);
- the admission configuration kinds themselves are exempt (:func:`is_exempt`).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

from k8py.api.selectors import label_selector_from_dict
from k8py.apiserver.webhooks.attributes import RequestAttributes

__all__ = ["is_exempt", "rule_matches", "rules_match", "namespace_selector_matches", "object_selector_matches", "resource_matches"]

Object = dict[str, Any]


#: never sent to webhooks nor policies (upstream's IsExemptAdmissionConfigurationResource): a bad
#: webhook must not be able to lock out the configuration that would fix it
_EXEMPT = frozenset({"validatingwebhookconfigurations", "mutatingwebhookconfigurations", "validatingadmissionpolicies",
                     "validatingadmissionpolicybindings", "mutatingadmissionpolicies", "mutatingadmissionpolicybindings"})


def is_exempt(attrs: RequestAttributes) -> bool:
    return attrs.resource[0] == "admissionregistration.k8s.io" and attrs.resource[2] in _EXEMPT


def _matches_list(values: Iterable[str] | None, value: str) -> bool:
    return any(v == "*" or v == value for v in values or ())


def resource_matches(patterns: Iterable[str] | None, resource: str, subresource: str) -> bool:
    """``pods``, ``pods/status``, ``*`` (main resources only), ``*/status``, ``pods/*``, ``*/*``."""
    for pattern in patterns or ():
        if pattern == "*/*":
            return True
        res, _, sub = pattern.partition("/")
        if not sub:
            if not subresource and res in ("*", resource):
                return True
            continue
        if res in ("*", resource) and sub in ("*", subresource) and subresource:
            return True
    return False


def rule_matches(rule: Mapping[str, Any], attrs: RequestAttributes, *, group: str, version: str, resource: str) -> bool:
    if not _matches_list(rule.get("operations"), attrs.operation):
        return False
    if not _matches_list(rule.get("apiGroups"), group) or not _matches_list(rule.get("apiVersions"), version):
        return False
    if not resource_matches(rule.get("resources"), resource, attrs.subresource):
        return False
    scope = rule.get("scope") or "*"
    if scope == "*":
        return True
    # by the request's namespace, as upstream; a Namespace itself is cluster-scoped
    is_namespace = attrs.resource[0] == "" and attrs.resource[2] == "namespaces"
    namespaced = bool(attrs.namespace) and not is_namespace
    return namespaced if scope == "Namespaced" else not namespaced


def rules_match(rules: Iterable[Mapping[str, Any]] | None, attrs: RequestAttributes, *, match_policy: str,
                equivalents: Callable[[str, str], Iterable[str]]) -> tuple[str, str, str] | None:
    """The (group, version, resource) the request matched as, or None.

    ``equivalents(group, resource)`` lists the other served versions of that
    resource (``matchPolicy: Equivalent``)."""
    gvr = attrs.resource
    rules = list(rules or ())
    if any(rule_matches(r, attrs, group=gvr.group, version=gvr.version, resource=gvr.resource) for r in rules):
        return (gvr.group, gvr.version, gvr.resource)
    if match_policy != "Equivalent":
        return None
    for version in equivalents(gvr.group, gvr.resource):
        if version != gvr.version and any(rule_matches(r, attrs, group=gvr.group, version=version, resource=gvr.resource) for r in rules):
            return (gvr.group, version, gvr.resource)
    return None


def _labels(obj: Object | None) -> Mapping[str, str]:
    return ((obj or {}).get("metadata") or {}).get("labels") or {}


def namespace_selector_matches(selector: Mapping[str, Any] | None, attrs: RequestAttributes,
                               namespace_labels: Callable[[str], Mapping[str, str] | None]) -> bool:
    parsed = label_selector_from_dict(selector or {})
    if parsed.empty:
        return True
    if attrs.resource[0] == "" and attrs.resource[2] == "namespaces":
        # a Namespace is matched by its own labels
        return parsed.matches(_labels(attrs.object if attrs.object is not None else attrs.old_object))
    if not attrs.namespace:
        return True  # cluster-scoped: the selector does not apply
    labels = namespace_labels(attrs.namespace)
    return parsed.matches(labels or {})


def object_selector_matches(selector: Mapping[str, Any] | None, attrs: RequestAttributes) -> bool:
    parsed = label_selector_from_dict(selector or {})
    if parsed.empty:
        return True
    return parsed.matches(_labels(attrs.object)) or parsed.matches(_labels(attrs.old_object))
