"""apps/v1 semantic validation: Deployment, ReplicaSet, DaemonSet, StatefulSet,
ControllerRevision.

Upstream: ``pkg/apis/apps/validation/validation.go``. All four share the
selector/template rules (``ValidatePodTemplateSpecForReplicaSet``): a selector
is required and non-empty, it must select the template's labels, the
template's pods restart ``Always`` and have no ``activeDeadlineSeconds``; in
apps/v1 the selector is immutable.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from k8py.api.errors import Cause
from k8py.api.selectors import label_selector_from_dict

from k8py.apiserver.validation.field import (
    IntOrString, Raw, as_dict, forbidden, go_label_selector, go_map, immutable, invalid, is_int,
    label_selector, nonnegative, not_supported, required,
)
from k8py.apiserver.validation.podspec import validate_pod_template

__all__ = ["VALIDATORS"]

Object = dict[str, Any]
Validator = Callable[[Object, Object | None], list[Cause]]

_PERCENT = re.compile(r"[0-9]+%")
_PERCENT_MSG = (
    "a valid percent string must be a numeric string followed by an ending '%' "
    "(e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"
)


_KIND_WORD = {"deployment": "ReplicaSet", "daemonset": "DaemonSet", "statefulset": "StatefulSet"}


def _selector_value(selector: Any) -> Raw:
    return Raw(go_label_selector(selector if isinstance(selector, dict) else None))


def _selector_and_template(spec: Object, what: str, *, required_selector: bool = True) -> list[Cause]:
    causes: list[Cause] = []
    selector = spec.get("selector")
    if selector is None:
        if required_selector:
            causes.append(required("spec.selector"))
    else:
        causes.extend(label_selector(selector, "spec.selector"))
        if isinstance(selector, dict) and not selector.get("matchLabels") and not selector.get("matchExpressions"):
            causes.append(invalid("spec.selector", _selector_value(selector), f"empty selector is invalid for {what}"))
    template = spec.get("template")
    if not isinstance(template, dict):
        causes.append(required("spec.template"))
        return causes
    labels = (template.get("metadata") or {}).get("labels")
    try:
        parsed = label_selector_from_dict(selector if isinstance(selector, dict) else None)
    except Exception:  # invalid operators are reported by label_selector above
        parsed = None
    if parsed is not None and not parsed.empty and not parsed.matches(labels or {}):
        causes.append(invalid("spec.template.metadata.labels", Raw(go_map(labels)),
                              "`selector` does not match template `labels`"))
    causes.extend(validate_pod_template(template, "spec.template"))
    tspec = as_dict(template.get("spec"))
    restart = tspec.get("restartPolicy")
    if restart not in (None, "Always"):
        causes.append(not_supported("spec.template.spec.restartPolicy", restart, ("Always",)))
    if tspec.get("activeDeadlineSeconds") is not None:
        causes.append(forbidden("spec.template.spec.activeDeadlineSeconds",
                                f"activeDeadlineSeconds in {_KIND_WORD[what]} is not Supported"))
    return causes


def _int_or_percent(value: Any) -> tuple[int, bool]:
    """(number, is_percent); a malformed string counts as 0."""
    if isinstance(value, str):
        return (int(value[:-1]), True) if _PERCENT.fullmatch(value) else (0, True)
    return (value if is_int(value) else 0), False


def _positive_int_or_percent(value: Any, path: str) -> list[Cause]:
    if value is None:
        return []
    if isinstance(value, str):
        if not _PERCENT.fullmatch(value):
            return [invalid(path, IntOrString(value), _PERCENT_MSG)]
        return []
    if is_int(value) and value < 0:
        return [invalid(path, IntOrString(str(value)), "must be greater than or equal to 0")]
    return []


def _not_over_100_percent(value: Any, path: str) -> list[Cause]:
    number, percent = _int_or_percent(value)
    if percent and number > 100:
        return [invalid(path, IntOrString(str(value)), "must not be greater than 100%")]
    return []


def _common(spec: Object) -> list[Cause]:
    causes = nonnegative(spec.get("replicas"), "spec.replicas")
    causes += nonnegative(spec.get("minReadySeconds"), "spec.minReadySeconds")
    causes += nonnegative(spec.get("revisionHistoryLimit"), "spec.revisionHistoryLimit")
    return causes


def _selector_immutable(spec: Object, old: Object | None) -> list[Cause]:
    if old is None:
        return []
    old_spec = as_dict(old.get("spec"))
    if spec.get("selector") != old_spec.get("selector"):
        return [immutable("spec.selector", _selector_value(spec.get("selector")))]
    return []


def _deployment(obj: Object, old: Object | None) -> list[Cause]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [required("spec")]
    causes = _common(spec)
    causes += _selector_and_template(spec, "deployment")
    strategy = as_dict(spec.get("strategy"))
    kind = strategy.get("type")
    rolling = strategy.get("rollingUpdate")
    if kind == "Recreate":
        if rolling is not None:
            causes.append(forbidden("spec.strategy.rollingUpdate", "may not be specified when strategy `type` is 'Recreate'"))
    elif kind == "RollingUpdate":
        if not isinstance(rolling, dict):
            causes.append(required("spec.strategy.rollingUpdate", "this should be defaulted and never be nil"))
        else:
            p = "spec.strategy.rollingUpdate"
            unavailable, surge = rolling.get("maxUnavailable"), rolling.get("maxSurge")
            causes += _positive_int_or_percent(unavailable, f"{p}.maxUnavailable")
            causes += _positive_int_or_percent(surge, f"{p}.maxSurge")
            if _int_or_percent(unavailable)[0] == 0 and _int_or_percent(surge)[0] == 0:
                causes.append(invalid(f"{p}.maxUnavailable", IntOrString(str(unavailable if unavailable is not None else 0)),
                                      "may not be 0 when `maxSurge` is 0"))
            causes += _not_over_100_percent(unavailable, f"{p}.maxUnavailable")
    else:
        causes.append(not_supported("spec.strategy", kind or "", ("Recreate", "RollingUpdate")))
    deadline = spec.get("progressDeadlineSeconds")
    if deadline is not None:
        causes += nonnegative(deadline, "spec.progressDeadlineSeconds")
        if is_int(deadline) and deadline <= (spec.get("minReadySeconds") or 0):
            causes.append(invalid("spec.progressDeadlineSeconds", deadline, "must be greater than minReadySeconds"))
    return causes + _selector_immutable(spec, old)


def _replica_set(obj: Object, old: Object | None) -> list[Cause]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [required("spec")]
    # upstream's ReplicaSet reuses the deployment wording for an empty selector
    causes = _common(spec) + _selector_and_template(spec, "deployment")
    return causes + _selector_immutable(spec, old)


def _daemon_set(obj: Object, old: Object | None) -> list[Cause]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [required("spec")]
    causes = _common(spec) + _selector_and_template(spec, "daemonset")
    strategy = as_dict(spec.get("updateStrategy"))
    kind = strategy.get("type")
    if kind == "RollingUpdate":
        rolling = strategy.get("rollingUpdate")
        if not isinstance(rolling, dict):
            causes.append(required("spec.updateStrategy.rollingUpdate", "this should be defaulted and never be nil"))
        else:
            p = "spec.updateStrategy.rollingUpdate"
            unavailable, surge = rolling.get("maxUnavailable"), rolling.get("maxSurge")
            for value, name in ((unavailable, "maxUnavailable"), (surge, "maxSurge")):
                causes += _positive_int_or_percent(value, f"{p}.{name}")
                causes += _not_over_100_percent(value, f"{p}.{name}")
            has_unavailable = _int_or_percent(unavailable)[0] != 0
            has_surge = _int_or_percent(surge)[0] != 0
            if has_unavailable and has_surge:
                causes.append(invalid(f"{p}.maxSurge", IntOrString(str(surge)), "may not be set when maxUnavailable is non-zero"))
            elif not has_unavailable and not has_surge:
                causes.append(required(f"{p}.maxUnavailable", "cannot be 0 when maxSurge is 0"))
    elif kind != "OnDelete":
        causes.append(not_supported("spec.updateStrategy", kind or "", ("OnDelete", "RollingUpdate")))
    return causes + _selector_immutable(spec, old)


_STS_MUTABLE = ("replicas", "ordinals", "template", "updateStrategy", "minReadySeconds",
                "revisionHistoryLimit", "persistentVolumeClaimRetentionPolicy")


def _stateful_set(obj: Object, old: Object | None) -> list[Cause]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [required("spec")]
    causes = _common(spec)
    policy = spec.get("podManagementPolicy")
    if not policy:
        causes.append(required("spec.podManagementPolicy"))
    elif policy not in ("OrderedReady", "Parallel"):
        causes.append(invalid("spec.podManagementPolicy", policy, "must be 'OrderedReady' or 'Parallel'"))
    strategy = as_dict(spec.get("updateStrategy"))
    kind = strategy.get("type")
    if not kind:
        causes.append(required("spec.updateStrategy"))
    elif kind == "OnDelete":
        if strategy.get("rollingUpdate") is not None:
            causes.append(invalid("spec.updateStrategy.rollingUpdate", strategy["rollingUpdate"],
                                  "only allowed for updateStrategy 'RollingUpdate'"))
    elif kind == "RollingUpdate":
        rolling = strategy.get("rollingUpdate") or {}
        if isinstance(rolling, dict):
            causes += nonnegative(rolling.get("partition"), "spec.updateStrategy.rollingUpdate.partition")
    else:
        causes.append(invalid("spec.updateStrategy", strategy, "must be 'RollingUpdate' or 'OnDelete'"))
    causes += _selector_and_template(spec, "statefulset")
    if old is not None:
        old_spec = as_dict(old.get("spec"))
        rest = {k: v for k, v in spec.items() if k not in _STS_MUTABLE}
        old_rest = {k: v for k, v in old_spec.items() if k not in _STS_MUTABLE}
        if rest != old_rest:
            causes.append(forbidden(
                "spec",
                "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', "
                "'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' "
                "and 'minReadySeconds' are forbidden",
            ))
    return causes


def _controller_revision(obj: Object, old: Object | None) -> list[Cause]:
    """Upstream ``ValidateControllerRevisionCreate``/``Update``: data is
    mandatory and, once written, immutable; the revision number is non-negative."""
    causes: list[Cause] = []
    if obj.get("data") is None:
        causes.append(required("data", "data is mandatory"))
    causes += nonnegative(obj.get("revision"), "revision")
    if old is not None and obj.get("data") != old.get("data"):
        causes.append(immutable("data", Raw("runtime.RawExtension")))
    return causes


VALIDATORS: dict[str, Validator] = {
    "ControllerRevision": _controller_revision,
    "Deployment": _deployment,
    "ReplicaSet": _replica_set,
    "DaemonSet": _daemon_set,
    "StatefulSet": _stateful_set,
}
