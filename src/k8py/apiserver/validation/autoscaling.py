"""autoscaling HorizontalPodAutoscaler validation, as upstream's
``pkg/apis/autoscaling/validation``: replicas bounds, the scale target
reference, ``spec.metrics`` and ``spec.behavior``.

It runs on the stored (v2) form, so an autoscaling/v1 object is checked with
the v2 paths (``spec.metrics[0].resource.target.averageUtilization`` for a
``targetCPUUtilizationPercentage`` of 0), as upstream checks its internal form.

The metric rules, in upstream's order: the metric ``type`` must be one of the
five sources and its source field must be set, only that one (a second source
is Forbidden); each source checks its own target (``Resource`` and
``ContainerResource`` need averageUtilization or averageValue but not both,
``Pods`` an averageValue, ``Object`` a value or averageValue, ``External`` one
of them only); every target's ``type`` is Utilization, Value or AverageValue,
quantities must be positive and averageUtilization greater than 0.

A bad quantity is shown as upstream shows it: ``resource.Quantity`` has no
``String`` on its value, so apimachinery prints the struct (``%#v``) —
``resource.Quantity{i:resource.int64Amount{value:0, scale:0}, ...}`` — and
kubectl users see exactly that text.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from k8py.api.errors import Cause
from k8py.api.names import is_dns1123_label, is_qualified_name, is_valid_path_segment_name
from k8py.api.quantity import parse_quantity
from k8py.apiserver.validation.field import Raw, as_dict, forbidden, invalid, is_int, not_supported, required

__all__ = ["VALIDATORS", "go_quantity"]

Object = dict[str, Any]

_SOURCES = ("ContainerResource", "External", "Object", "Pods", "Resource")  # sorted, as sets.List
_FIELDS = {"Object": "object", "Pods": "pods", "Resource": "resource", "ContainerResource": "containerResource", "External": "external"}
# the order upstream inspects the source fields in
_PRESENT_ORDER = ("object", "external", "pods", "resource", "containerResource")
_MAX_PERIOD, _MAX_WINDOW = 1800, 3600


def validate_hpa(obj: Object, old: Object | None) -> list[Cause]:
    spec = as_dict(obj.get("spec"))
    causes: list[Cause] = []
    low, high = spec.get("minReplicas"), spec.get("maxReplicas")
    if is_int(low) and low < 1:  # HPAScaleToZero is alpha and off: the lower bound is 1
        causes.append(invalid("spec.minReplicas", low, "must be greater than or equal to 1"))
    high_value = high if is_int(high) else 0
    if high_value < 1:
        causes.append(invalid("spec.maxReplicas", high_value, "must be greater than 0"))
    if is_int(low) and high_value < low:
        causes.append(invalid("spec.maxReplicas", high_value, "must be greater than or equal to `minReplicas`"))
    causes += _object_reference(as_dict(spec.get("scaleTargetRef")), "spec.scaleTargetRef")
    for i, metric in enumerate(spec.get("metrics") or ()):
        causes += _metric(as_dict(metric), f"spec.metrics[{i}]")
    behavior = spec.get("behavior")
    if isinstance(behavior, dict):
        for direction in ("scaleUp", "scaleDown"):
            if isinstance(behavior.get(direction), dict):
                causes += _scaling_rules(behavior[direction], f"spec.behavior.{direction}")
    return causes


def _object_reference(ref: Object, path: str) -> list[Cause]:
    """``ValidateCrossVersionObjectReference``."""
    causes = []
    for key in ("kind", "name"):
        value = ref.get(key)
        if not value:
            causes.append(required(f"{path}.{key}"))
        else:
            causes += [invalid(f"{path}.{key}", value, m) for m in is_valid_path_segment_name(str(value))]
    return causes


def _metric(metric: Object, path: str) -> list[Cause]:
    """``validateMetricSpec``: the type names the one source that is set."""
    causes = []
    kind = metric.get("type") or ""
    if not kind:
        causes.append(required(f"{path}.type", "must specify a metric source type"))
    if kind not in _SOURCES:
        causes.append(not_supported(f"{path}.type", kind, _SOURCES))
    present = [f for f in _PRESENT_ORDER if isinstance(metric.get(f), dict)]
    if present:  # only the first source present is checked further
        first = present[0]
        causes += _SOURCE_CHECKS[first](metric[first], f"{path}.{first}")
    expected = _FIELDS.get(kind)
    if expected is None:
        causes.append(not_supported(f"{path}.type", kind, _SOURCES))
    elif expected not in present:
        causes.append(required(f"{path}.{expected}", "must populate information for the given metric source"))
    if len(present) != 1:
        causes += [forbidden(f"{path}.{f}", "must populate the given metric source only") for f in sorted(present) if f != expected]
    return causes


def _target(source: Object, path: str) -> tuple[Object, list[Cause]]:
    """``validateMetricTarget``: the target's type and the signs of its values."""
    target = as_dict(source.get("target"))
    at = f"{path}.target"
    causes = []
    kind = target.get("type") or ""
    if not kind:
        causes.append(required(f"{at}.type", "must specify a metric target type"))
    if kind not in ("Utilization", "Value", "AverageValue"):
        causes.append(invalid(f"{at}.type", kind, "must be either Utilization, Value, or AverageValue"))
    for key in ("value", "averageValue"):
        if target.get(key) is not None:
            quantity = _quantity(target[key])
            if quantity is not None and quantity <= 0:
                causes.append(invalid(f"{at}.{key}", Raw(go_quantity(target[key])), "must be positive"))
    utilization = target.get("averageUtilization")
    if is_int(utilization) and utilization < 1:
        causes.append(invalid(f"{at}.averageUtilization", utilization, "must be greater than 0"))
    return target, causes


def _metric_name(source: Object, path: str) -> list[Cause]:
    """``validateMetricIdentifier``."""
    name = as_dict(source.get("metric")).get("name")
    if not name:
        return [required(f"{path}.metric.name", "must specify a metric name")]
    return [invalid(f"{path}.metric.name", name, m) for m in is_valid_path_segment_name(str(name))]


def _resource_target(target: Object, path: str) -> list[Cause]:
    causes = []
    utilization, average = target.get("averageUtilization"), target.get("averageValue")
    if utilization is None and average is None:
        causes.append(required(f"{path}.target.averageUtilization", "must set either a target raw value or a target utilization"))
    if utilization is not None and average is not None:
        causes.append(forbidden(f"{path}.target.averageValue", "may not set both a target raw value and a target utilization"))
    return causes


def _resource(source: Object, path: str) -> list[Cause]:
    causes = [] if source.get("name") else [required(f"{path}.name", "must specify a resource name")]
    target, more = _target(source, path)
    return causes + more + _resource_target(target, path)


def _container_resource(source: Object, path: str) -> list[Cause]:
    causes = []
    name = source.get("name")
    if not name:
        causes.append(required(f"{path}.name", "must specify a resource name"))
    else:
        causes += _container_resource_name(str(name), f"{path}.name")
    container = source.get("container")
    if not container:
        causes.append(required(f"{path}.container", "must specify a container"))
    else:
        causes += [invalid(f"{path}.container", container, m) for m in is_dns1123_label(str(container))]
    target, more = _target(source, path)
    return causes + more + _resource_target(target, path)


def _pods(source: Object, path: str) -> list[Cause]:
    target, causes = _target(source, path)
    causes = _metric_name(source, path) + causes
    if target.get("averageValue") is None:
        causes.append(required(f"{path}.target.averageValue", "must specify a positive target averageValue"))
    return causes


def _object(source: Object, path: str) -> list[Cause]:
    causes = _object_reference(as_dict(source.get("describedObject")), f"{path}.describedObject") + _metric_name(source, path)
    target, more = _target(source, path)
    causes += more
    if target.get("value") is None and target.get("averageValue") is None:
        causes.append(required(f"{path}.target.averageValue", "must set either a target value or averageValue"))
    return causes


def _external(source: Object, path: str) -> list[Cause]:
    causes = _metric_name(source, path)
    target, more = _target(source, path)
    causes += more
    value, average = target.get("value"), target.get("averageValue")
    if value is None and average is None:
        causes.append(required(f"{path}.target.averageValue", "must set either a target value for metric or a per-pod target"))
    if value is not None and average is not None:
        causes.append(forbidden(f"{path}.target.value", "may not set both a target value for metric and a per-pod target"))
    return causes


_SOURCE_CHECKS = {"object": _object, "external": _external, "pods": _pods, "resource": _resource, "containerResource": _container_resource}

_STANDARD_CONTAINER_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})


def _container_resource_name(name: str, path: str) -> list[Cause]:
    """``ValidateContainerResourceName``: a standard container resource, or a
    native (``kubernetes.io/``) or extended (``domain/name``) one."""
    causes = [invalid(path, name, m) for m in is_qualified_name(name)]
    if "/" not in name:
        if name not in _STANDARD_CONTAINER_RESOURCES and not name.startswith("hugepages-"):
            causes.append(invalid(path, name, "must be a standard resource for containers"))
    elif not (name.startswith("kubernetes.io/") or ".kubernetes.io/" in name.split("/")[0]):
        if name.startswith("requests."):
            causes.append(invalid(path, name, "doesn't follow extended resource name standard"))
    return causes


def _scaling_rules(rules: Object, path: str) -> list[Cause]:
    """``validateScalingRules`` / ``validateScalingPolicy``."""
    causes = []
    window = rules.get("stabilizationWindowSeconds")
    if is_int(window) and window < 0:
        causes.append(invalid(f"{path}.stabilizationWindowSeconds", window, "must be greater than or equal to zero"))
    if is_int(window) and window > _MAX_WINDOW:
        causes.append(invalid(f"{path}.stabilizationWindowSeconds", window, f"must be less than or equal to {_MAX_WINDOW}"))
    select = rules.get("selectPolicy")
    if select is not None and select not in ("Disabled", "Max", "Min"):
        causes.append(not_supported(f"{path}.selectPolicy", select, ("Disabled", "Max", "Min")))
    policies = rules.get("policies")
    if not policies:
        causes.append(required(f"{path}.policies", "must specify at least one Policy"))
    for i, policy in enumerate(policies or ()):
        at = f"{path}.policies[{i}]"
        policy = as_dict(policy)
        kind = policy.get("type") or ""
        value, period = policy.get("value"), policy.get("periodSeconds")
        value, period = (value if is_int(value) else 0), (period if is_int(period) else 0)
        if kind not in ("Pods", "Percent"):
            causes.append(not_supported(f"{at}.type", kind, ("Percent", "Pods")))
        if value <= 0:
            causes.append(invalid(f"{at}.value", value, "must be greater than zero"))
        if period <= 0:
            causes.append(invalid(f"{at}.periodSeconds", period, "must be greater than zero"))
        if period > _MAX_PERIOD:
            causes.append(invalid(f"{at}.periodSeconds", period, f"must be less than or equal to {_MAX_PERIOD}"))
    return causes


def _quantity(value: Any) -> Fraction | None:
    try:
        return parse_quantity(value)
    except (ValueError, TypeError):
        return None  # the decoder's concern (a 400), not a semantic error


_PARTS = re.compile(r"^([+-]?)([0-9]*)(?:\.([0-9]*))?(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$")
_SI = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BIN = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}


def go_quantity(value: Any) -> str:
    """A parsed ``resource.Quantity`` printed with ``%#v``: its int64 amount
    (digits and base-10 scale, as the parser's fast path keeps them), the
    cached string when the input was already canonical, and the format."""
    text = str(value).strip()
    m = _PARTS.match(text)
    if m is None:
        return f'resource.Quantity{{s:"{text}"}}'
    sign, whole, frac, suffix = m.group(1), m.group(2) or "0", m.group(3) or "", m.group(4) or ""
    digits = int(whole + frac)
    if suffix in _BIN:
        # (a fraction of a binary unit takes upstream's slow path, an inf.Dec; shown as its int64 form here)
        fmt, scale, amount = "BinarySI", -len(frac), digits * 2 ** _BIN[suffix]
        canonical = not frac and digits & 0x07 != 0
    else:
        fmt = "DecimalExponent" if suffix[:1] in ("e", "E") else "DecimalSI"
        scale = (int(suffix[1:]) if fmt == "DecimalExponent" else _SI[suffix]) - len(frac)
        amount = digits
        shifted = (whole + frac).lstrip("0") or "0"
        canonical = scale % 3 == 0 and (shifted == "0" or not shifted.endswith("000"))
    if sign == "-":
        amount = -amount
    cached = text if canonical and sign != "+" else ""
    return (f"resource.Quantity{{i:resource.int64Amount{{value:{amount}, scale:{scale}}}, "
            f'd:resource.infDecAmount{{Dec:(*inf.Dec)(nil)}}, s:"{cached}", Format:"{fmt}"}}')


VALIDATORS = {"HorizontalPodAutoscaler": validate_hpa}
