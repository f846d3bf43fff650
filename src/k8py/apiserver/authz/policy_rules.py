"""Building PolicyRules the way upstream's bootstrap policy writes them.

``rule("get", "list", groups=[""], resources=["pods"])`` is upstream's
``NewRule("get", "list").Groups("").Resources("pods").RuleOrDie()``: every
list sorted, as the builder's ``Rule()`` sorts them, so the objects the
server creates compare equal to what reconciliation computes.
"""

from __future__ import annotations

from typing import Any, Iterable

__all__ = ["rule", "READ", "WRITE", "READ_WRITE", "LEGACY", "events_rule", "BOOTSTRAP_LABEL", "AUTOUPDATE"]

Object = dict[str, Any]

READ = ("get", "list", "watch")
WRITE = ("create", "update", "patch", "delete", "deletecollection")
READ_WRITE = READ + WRITE
LEGACY = ""

#: what upstream labels and annotates every bootstrap object with
BOOTSTRAP_LABEL = {"kubernetes.io/bootstrapping": "rbac-defaults"}
AUTOUPDATE = "rbac.authorization.kubernetes.io/autoupdate"


def rule(*verbs: str, groups: Iterable[str] = (), resources: Iterable[str] = (), names: Iterable[str] = (),
         urls: Iterable[str] = ()) -> Object:
    out: Object = {"verbs": sorted(set(verbs))}
    groups, resources, names, urls = sorted(set(groups)), sorted(set(resources)), sorted(set(names)), sorted(set(urls))
    if groups:
        out["apiGroups"] = groups
    if resources:
        out["resources"] = resources
    if names:
        out["resourceNames"] = names
    if urls:
        out["nonResourceURLs"] = urls
    return out


def events_rule() -> Object:
    """Writing Events, core and events.k8s.io (upstream's eventsRule)."""
    return rule("create", "update", "patch", groups=["", "events.k8s.io"], resources=["events"])
