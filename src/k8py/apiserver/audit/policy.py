"""The audit ``Policy`` (audit.k8s.io/v1): which requests are recorded, at which level.

Rules are tried in order; the first that matches a request gives its level
(``None``, ``Metadata``, ``Request``, ``RequestResponse``) and the stages it
omits (its own ``omitStages`` plus the policy's). A rule matches when each
of its lists that is set contains the request's value: ``users``,
``userGroups`` (any group), ``verbs``, ``namespaces`` (``""`` for
cluster-scoped), ``resources`` (``group`` + ``resources`` with ``pods``,
``pods/log``, ``pods/*``, ``*/scale``, ``*``, and ``resourceNames``) for
resource requests, ``nonResourceURLs`` (exact, or a prefix ending in ``*``)
for the others. No rule matching means level ``None``, as upstream.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import yaml

__all__ = ["AuditPolicy", "AuditPolicyError", "LEVELS", "STAGES", "RequestFacts", "load_policy"]

LEVELS = ("None", "Metadata", "Request", "RequestResponse")
STAGES = ("RequestReceived", "ResponseStarted", "ResponseComplete", "Panic")


class AuditPolicyError(ValueError):
    """A bad ``--audit-policy-file`` (the server does not start)."""


@dataclass(frozen=True, slots=True)
class RequestFacts:
    """What a policy decides on."""

    user: str
    groups: tuple[str, ...]
    verb: str
    resource_request: bool
    api_group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""
    api_version: str = ""
    #: watch, exec, attach, portforward, proxy, log follow: has a ResponseStarted stage
    long_running: bool = False


def _resource_matches(rule: Mapping[str, Any], f: RequestFacts) -> bool:
    if not f.resource_request:
        return False
    for gr in rule:
        if gr.get("group", "") != f.api_group and gr.get("group") != "*":
            continue
        names = gr.get("resourceNames") or []
        if names and f.name not in names:
            continue
        resources = gr.get("resources") or []
        if not resources:
            return True
        full = f"{f.resource}/{f.subresource}" if f.subresource else f.resource
        for r in resources:
            if r in ("*", full) or (r == f"{f.resource}/*" and f.subresource) or (r == f"*/{f.subresource}" and f.subresource):
                return True
    return False


def _url_matches(patterns: list[str], path: str) -> bool:
    return any(path == p or (p.endswith("*") and path.startswith(p[:-1])) for p in patterns)


@dataclass(frozen=True)
class AuditPolicy:
    rules: tuple[Mapping[str, Any], ...]
    omit_stages: frozenset[str] = frozenset()
    omit_managed_fields: bool = False

    def level_for(self, f: RequestFacts) -> tuple[str, frozenset[str], bool]:
        """(level, omitted stages, omit managed fields)."""
        for rule in self.rules:
            if rule.get("users") and f.user not in rule["users"]:
                continue
            if rule.get("userGroups") and not set(rule["userGroups"]) & set(f.groups):
                continue
            if rule.get("verbs") and f.verb not in rule["verbs"]:
                continue
            if rule.get("namespaces") is not None and rule.get("namespaces") and f.namespace not in rule["namespaces"]:
                continue
            if rule.get("resources") and not _resource_matches(rule["resources"], f):
                continue
            if rule.get("nonResourceURLs") and (f.resource_request or not _url_matches(rule["nonResourceURLs"], f.path)):
                continue
            if (rule.get("resources") or rule.get("namespaces")) and not f.resource_request:
                continue
            omit = self.omit_stages | frozenset(rule.get("omitStages") or ())
            managed = rule.get("omitManagedFields", self.omit_managed_fields)
            return rule["level"], omit, bool(managed)
        return "None", self.omit_stages, self.omit_managed_fields


def parse_policy(doc: Any, where: str = "audit policy") -> AuditPolicy:
    if not isinstance(doc, dict) or doc.get("kind") != "Policy" or doc.get("apiVersion") != "audit.k8s.io/v1":
        raise AuditPolicyError(f"{where}: expected apiVersion audit.k8s.io/v1, kind Policy")
    rules = doc.get("rules")
    if not isinstance(rules, list) or not rules:
        raise AuditPolicyError(f"{where}: rules must be a non-empty list (a policy without rules records nothing)")
    for i, rule in enumerate(rules):
        if not isinstance(rule, dict) or rule.get("level") not in LEVELS:
            raise AuditPolicyError(f"{where}: rules[{i}].level must be one of {', '.join(LEVELS)}")
        if rule.get("resources") and rule.get("nonResourceURLs"):
            raise AuditPolicyError(f"{where}: rules[{i}]: rules cannot apply to both regular resources and non-resource URLs")
        for stage in rule.get("omitStages") or ():
            if stage not in STAGES:
                raise AuditPolicyError(f"{where}: rules[{i}].omitStages: unknown stage {stage!r}: use {', '.join(STAGES)}")
    for stage in doc.get("omitStages") or ():
        if stage not in STAGES:
            raise AuditPolicyError(f"{where}: omitStages: unknown stage {stage!r}: use {', '.join(STAGES)}")
    return AuditPolicy(tuple(rules), frozenset(doc.get("omitStages") or ()), bool(doc.get("omitManagedFields")))


def load_policy(path: str) -> AuditPolicy:
    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
    except OSError as err:
        raise AuditPolicyError(f"cannot read audit policy {path}: {err.strerror or err}") from None
    except yaml.YAMLError as err:
        raise AuditPolicyError(f"audit policy {path} is not valid YAML: {err}") from None
    return parse_policy(doc, path)
