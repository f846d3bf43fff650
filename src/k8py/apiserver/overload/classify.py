"""Which FlowSchema a request matches, and the flow it belongs to (upstream's APF classification).

:func:`classify` walks the FlowSchemas in order of ``matchingPrecedence``
(ties by name) and returns the first whose some rule matches both a subject
(``User``, ``Group`` or ``ServiceAccount``, ``*`` a wildcard) and the request:

- a resource request against ``resourceRules``: ``verbs``, ``apiGroups``,
  ``resources`` (``pods/log`` for a subresource, ``*`` for all), and either
  ``clusterScope`` (no namespace) or ``namespaces``;
- any other request against ``nonResourceRules``: ``verbs`` and
  ``nonResourceURLs`` (exact, ``*``, or a ``/prefix/*``).

The flow is the schema's name plus its distinguisher: ``ByUser`` (the user
name), ``ByNamespace`` (the request's namespace) or none (one flow). Pure
functions over JSON-shaped objects: the filter passes what the watch cache has.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from k8py.apiserver.authn.user import UserInfo
from k8py.apiserver.authz.attributes import Attributes

__all__ = ["classify", "flow_distinguisher", "ordered"]

Object = dict[str, Any]
_SA_PREFIX = "system:serviceaccount:"


def ordered(schemas: Iterable[Object]) -> list[Object]:
    """FlowSchemas in the order they are tried."""
    return sorted(schemas, key=lambda fs: (int((fs.get("spec") or {}).get("matchingPrecedence") or 1000),
                                           (fs.get("metadata") or {}).get("name") or ""))


def _subject_matches(subject: Object, user: UserInfo) -> bool:
    kind = subject.get("kind")
    if kind == "User":
        name = (subject.get("user") or {}).get("name")
        return name == "*" or name == user.name
    if kind == "Group":
        name = (subject.get("group") or {}).get("name")
        return name == "*" or name in user.groups
    if kind == "ServiceAccount":
        sa = subject.get("serviceAccount") or {}
        if not user.name.startswith(_SA_PREFIX):
            return False
        namespace, _, name = user.name[len(_SA_PREFIX):].partition(":")
        return sa.get("namespace") in ("*", namespace) and sa.get("name") in ("*", name)
    return False


def _has(values: Sequence[str] | None, value: str) -> bool:
    return bool(values) and ("*" in values or value in values)  # type: ignore[operator]


def _resource_rule_matches(rule: Object, a: Attributes) -> bool:
    if not (_has(rule.get("verbs"), a.verb) and _has(rule.get("apiGroups"), a.api_group)):
        return False
    resource = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
    if not _has(rule.get("resources"), resource):
        return False
    if not a.namespace:
        return bool(rule.get("clusterScope"))
    return _has(rule.get("namespaces"), a.namespace)


def _url_matches(patterns: Sequence[str], path: str) -> bool:
    for p in patterns:
        if p == "*" or p == path:
            return True
        if p.endswith("/*") and (path == p[:-2] or path.startswith(p[:-1])):
            return True
    return False


def _nonresource_rule_matches(rule: Object, a: Attributes) -> bool:
    return _has(rule.get("verbs"), a.verb) and _url_matches(rule.get("nonResourceURLs") or (), a.path)


def _rule_matches(rule: Object, a: Attributes) -> bool:
    if not any(_subject_matches(s, a.user) for s in rule.get("subjects") or ()):
        return False
    if a.resource_request:
        return any(_resource_rule_matches(r, a) for r in rule.get("resourceRules") or ())
    return any(_nonresource_rule_matches(r, a) for r in rule.get("nonResourceRules") or ())


def classify(schemas: Sequence[Object], a: Attributes) -> Object | None:
    """The first schema of ``schemas`` (already :func:`ordered`) that matches, or None."""
    for fs in schemas:
        if any(_rule_matches(rule, a) for rule in (fs.get("spec") or {}).get("rules") or ()):
            return fs
    return None


def flow_distinguisher(schema: Object, a: Attributes) -> str:
    method = ((schema.get("spec") or {}).get("distinguisherMethod") or {}).get("type")
    if method == "ByUser":
        return a.user.name
    if method == "ByNamespace":
        return a.namespace
    return ""
