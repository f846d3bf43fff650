"""``spec.podFailurePolicy``: which rule a failed pod matches, and what it does.

Upstream: ``pkg/controller/job/pod_failure_policy.go``. Rules are tried in
order and the first match wins; only pods in phase ``Failed`` are matched.

- ``onExitCodes`` looks at every terminated container (init containers too)
  with a non-zero exit code, optionally only the named one; ``In`` matches an
  exit code in ``values``, ``NotIn`` one outside them.
- ``onPodConditions`` matches when the pod has a condition of that type and
  status (the API server defaults ``status`` to "True").

Actions: ``FailJob`` fails the Job at once (with the message built here),
``FailIndex`` fails the pod's index, ``Ignore`` does not count the failure
against ``backoffLimit``, ``Count`` (and no match) counts it as usual.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

__all__ = ["PolicyMatch", "match_pod_failure_policy"]


@dataclass(frozen=True)
class PolicyMatch:
    action: str | None  # None: no rule matched
    counts: bool  # counted against backoffLimit
    message: str | None = None  # for FailJob


def _exit_code_match(pod: Mapping[str, Any], requirement: Mapping[str, Any]) -> Mapping[str, Any] | None:
    status = pod.get("status") or {}
    wanted_name = requirement.get("containerName")
    values = set(requirement.get("values") or ())
    operator = requirement.get("operator")
    for cs in [*(status.get("initContainerStatuses") or ()), *(status.get("containerStatuses") or ())]:
        if wanted_name and cs.get("name") != wanted_name:
            continue
        terminated = (cs.get("state") or {}).get("terminated")
        if not terminated:
            continue
        code = terminated.get("exitCode", 0)
        if code == 0:
            continue
        if (operator == "In" and code in values) or (operator == "NotIn" and code not in values):
            return cs
    return None


def _condition_match(pod: Mapping[str, Any], patterns: list[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    conditions = (pod.get("status") or {}).get("conditions") or ()
    for pattern in patterns:
        for cond in conditions:
            if cond.get("type") == pattern.get("type") and cond.get("status") == pattern.get("status", "True"):
                return cond
    return None


def match_pod_failure_policy(policy: Mapping[str, Any] | None, pod: Mapping[str, Any]) -> PolicyMatch:
    if not policy or (pod.get("status") or {}).get("phase") != "Failed":
        return PolicyMatch(None, True)
    meta = pod.get("metadata") or {}
    pod_ref = f"{meta.get('namespace')}/{meta.get('name')}"
    for i, rule in enumerate(policy.get("rules") or ()):
        action = rule.get("action")
        message: str | None = None
        if rule.get("onExitCodes") is not None:
            cs = _exit_code_match(pod, rule["onExitCodes"])
            if cs is None:
                continue
            code = cs["state"]["terminated"].get("exitCode")
            message = (f"Container {cs.get('name')} for pod {pod_ref} failed with exit code {code} "
                       f"matching {action} rule at index {i}")
        elif rule.get("onPodConditions"):
            cond = _condition_match(pod, rule["onPodConditions"])
            if cond is None:
                continue
            message = f"Pod {pod_ref} has condition {cond.get('type')} matching {action} rule at index {i}"
        else:
            continue
        if action == "Ignore":
            return PolicyMatch(action, False)
        if action == "FailJob":
            return PolicyMatch(action, True, message)
        return PolicyMatch(action, True)
    return PolicyMatch(None, True)
