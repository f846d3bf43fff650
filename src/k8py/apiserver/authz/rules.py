"""PolicyRule matching and covering, as upstream's ``rbac/v1`` helpers and
``registry/rbac/validation`` define them.

Two questions, both pure:

- :func:`rule_allows`: does one rule allow one request? verbs (``*``), API
  groups (``*``), resources (``*``, ``pods/log``, ``*/scale`` matches any
  ``scale`` subresource — but ``pods/*`` is only the literal), resourceNames
  (empty = any name), nonResourceURLs (``*``, exact, or a trailing ``*``
  prefix);
- :func:`uncovered`: which parts of a set of requested rules does a set of
  owned rules not cover (the escalation check): each requested rule is broken
  into atomic rules (one verb, one group, one resource or URL, one name) and
  each must be covered by some owned rule; the rest is compacted and sorted
  for the message, as ``CompactString`` prints it.

Rules are the JSON-shaped dicts of the API (``apiGroups``, ``resources``,
``resourceNames``, ``nonResourceURLs``, ``verbs``); nothing here mutates them.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from k8py.apiserver.authz.attributes import Attributes

__all__ = ["rule_allows", "rules_allow", "uncovered", "compact_string", "go_quote_list"]

Rule = Mapping[str, Any]


def _has(values: Sequence[str] | None, value: str) -> bool:
    return bool(values) and (value in values)  # type: ignore[operator]


def verb_matches(rule: Rule, verb: str) -> bool:
    verbs = rule.get("verbs") or ()
    return "*" in verbs or verb in verbs


def group_matches(rule: Rule, group: str) -> bool:
    groups = rule.get("apiGroups") or ()
    return "*" in groups or group in groups


def resource_matches(rule: Rule, combined: str, subresource: str) -> bool:
    for resource in rule.get("resources") or ():
        if resource == "*" or resource == combined:
            return True
        if subresource and resource == "*/" + subresource:
            return True
    return False


def name_matches(rule: Rule, name: str) -> bool:
    names = rule.get("resourceNames") or ()
    return not names or name in names


def url_matches(rule: Rule, path: str) -> bool:
    for url in rule.get("nonResourceURLs") or ():
        if url == "*" or url == path:
            return True
        if url.endswith("*") and path.startswith(url[:-1]):
            return True
    return False


def rule_allows(attributes: Attributes, rule: Rule) -> bool:
    if attributes.resource_request:
        combined = attributes.resource
        if attributes.subresource:
            combined = f"{combined}/{attributes.subresource}"
        return (verb_matches(rule, attributes.verb) and group_matches(rule, attributes.api_group)
                and resource_matches(rule, combined, attributes.subresource) and name_matches(rule, attributes.name))
    return verb_matches(rule, attributes.verb) and url_matches(rule, attributes.path)


def rules_allow(attributes: Attributes, rules: Iterable[Rule]) -> bool:
    return any(rule_allows(attributes, r) for r in rules)


# -- covering (escalation) ----------------------------------------------------


def _breakdown(rule: Rule) -> list[dict[str, list[str]]]:
    """One rule per verb × group × resource × name (or URL × verb)."""
    out: list[dict[str, list[str]]] = []
    verbs = list(rule.get("verbs") or ())
    for group in rule.get("apiGroups") or ():
        for resource in rule.get("resources") or ():
            for verb in verbs:
                names = rule.get("resourceNames") or ()
                if names:
                    out.extend({"apiGroups": [group], "resources": [resource], "resourceNames": [n], "verbs": [verb]}
                               for n in names)
                else:
                    out.append({"apiGroups": [group], "resources": [resource], "verbs": [verb]})
    for url in rule.get("nonResourceURLs") or ():
        out.extend({"nonResourceURLs": [url], "verbs": [verb]} for verb in verbs)
    return out


def _has_all(owned: Sequence[str], wanted: Sequence[str]) -> bool:
    return all(w in owned for w in wanted)


def _resources_cover(owned: Sequence[str], wanted: Sequence[str]) -> bool:
    if "*" in owned or _has_all(owned, wanted):
        return True
    for path in wanted:
        if path in owned:
            continue
        if "/" not in path:
            return False
        if "*/" + path.split("/", 1)[1] not in owned:
            return False
    return True


def _urls_cover(owned: Sequence[str], wanted: Sequence[str]) -> bool:
    for url in wanted:
        if not any(o == url or (o.endswith("*") and url.startswith(o[:-1])) for o in owned):
            return False
    return True


def _rule_covers(owner: Rule, sub: Rule) -> bool:
    owner_verbs = owner.get("verbs") or ()
    owner_groups = owner.get("apiGroups") or ()
    owner_names = owner.get("resourceNames") or ()
    sub_names = sub.get("resourceNames") or ()
    if not ("*" in owner_verbs or _has_all(owner_verbs, sub.get("verbs") or ())):
        return False
    if not ("*" in owner_groups or _has_all(owner_groups, sub.get("apiGroups") or ())):
        return False
    if not _resources_cover(owner.get("resources") or (), sub.get("resources") or ()):
        return False
    if not _urls_cover(owner.get("nonResourceURLs") or (), sub.get("nonResourceURLs") or ()):
        return False
    if sub_names:
        return not owner_names or _has_all(owner_names, sub_names)
    return not owner_names


def uncovered(owned: Sequence[Rule], requested: Iterable[Rule]) -> list[dict[str, list[str]]]:
    """The requested permissions no owned rule covers, compacted and sorted
    (empty: the owner holds everything requested)."""
    missing = [atom for rule in requested for atom in _breakdown(rule)
               if not any(_rule_covers(o, atom) for o in owned)]
    return sorted(_compact(missing), key=compact_string)


def _compact(rules: list[dict[str, list[str]]]) -> list[dict[str, list[str]]]:
    """Merge the verbs of rules naming one group and one resource and no names
    (upstream's CompactRules)."""
    merged: dict[tuple[str, str], dict[str, list[str]]] = {}
    out: list[dict[str, list[str]]] = []
    for rule in rules:
        if "resources" in rule and "resourceNames" not in rule:
            key = (rule["apiGroups"][0], rule["resources"][0])
            if key in merged:
                merged[key]["verbs"] = merged[key]["verbs"] + [v for v in rule["verbs"] if v not in merged[key]["verbs"]]
                continue
            merged[key] = dict(rule)
            out.append(merged[key])
        else:
            out.append(rule)
    return out


def go_quote_list(values: Iterable[str]) -> str:
    """Go's ``%q`` of a ``[]string``: ``["a" "b"]``."""
    return "[" + " ".join('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values) + "]"


def compact_string(rule: Rule) -> str:
    """``{APIGroups:["apps"], Resources:["deployments"], Verbs:["create"]}``, as upstream prints a rule."""
    parts = []
    for field, label in (("apiGroups", "APIGroups"), ("resources", "Resources"), ("nonResourceURLs", "NonResourceURLs"),
                         ("resourceNames", "ResourceNames"), ("verbs", "Verbs")):
        values = rule.get(field)
        if values:
            parts.append(f"{label}:{go_quote_list(values)}")
    return "{" + ", ".join(parts) + "}"
