"""Printer for HorizontalPodAutoscalers:
``NAME  REFERENCE  TARGETS  MINPODS  MAXPODS  REPLICAS  AGE`` (upstream's
printHorizontalPodAutoscaler; TARGETS as ``formatHPAMetrics``:
``cpu: 30%/50%``, ``memory: 1Gi/2Gi``, Pods ``150m/100m``, Object and
External ``5/10`` or ``2500m/1 (avg)``; ``<unknown>`` before the controller has
measured (a current metric is paired with its spec by position, as upstream);
at most two metrics then ``+ N more...``). Works on the v2 form and the v1 view."""

from __future__ import annotations

from typing import Any

from k8py.api.quantity import format_milli_quantity, quantity_milli_value

from .cells import dig, object_age
from .columns import Column, Printer, age_column, name_column

__all__ = ["PRINTERS"]

_HPA = "io.k8s.api.autoscaling.v2.HorizontalPodAutoscaler"


def _quantity_or_unknown(value: Any, suffix: str = "") -> str:
    return "<unknown>" if value is None else f"{value}{suffix}"


def _canonical(value: Any) -> str:
    """A target quantity as ``Quantity.String()`` prints a decimal one (``0.5`` -> ``500m``,
    ``2000m`` -> ``2``); binary-suffixed and exponent forms are shown as written."""
    text = str(value)
    if any(c in text for c in "eEi") or text.endswith(("n", "u")):
        return text
    try:
        return format_milli_quantity(quantity_milli_value(text))
    except ValueError:
        return text


def _targets(obj: dict[str, Any]) -> str:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    if "targetCPUUtilizationPercentage" in spec or ("metrics" not in spec and "maxReplicas" in spec):
        if spec.get("targetCPUUtilizationPercentage") is None:
            return "<none>"
        return f"cpu: {_quantity_or_unknown(status.get('currentCPUUtilizationPercentage'), '%')}/{spec['targetCPUUtilizationPercentage']}%"
    metrics = spec.get("metrics") or []
    if not metrics:
        return "<none>"
    statuses = status.get("currentMetrics") or []
    parts = [_target(m, statuses[i] if i < len(statuses) else {}) for i, m in enumerate(metrics)]
    if len(parts) > 2:
        return ", ".join(parts[:2]) + f" + {len(parts) - 2} more..."
    return ", ".join(parts)


def _target(metric: dict[str, Any], status: dict[str, Any]) -> str:
    """One metric as ``formatHPAMetrics`` prints it; ``status`` is ``currentMetrics``
    at the same index (upstream pairs them by position)."""
    kind = metric.get("type")
    key = _field(metric)
    body = metric.get(key) or {}
    target = body.get("target") or {}
    current = (status.get(key) or {}).get("current") if status.get(key) else None
    if kind in ("External", "Object"):
        if target.get("averageValue") is not None:
            return f"{_quantity_or_unknown((current or {}).get('averageValue'))}/{_canonical(target['averageValue'])} (avg)"
        return f"{_quantity_or_unknown((current or {}).get('value'))}/{_canonical(target.get('value'))}"
    if kind == "Pods":
        return f"{_quantity_or_unknown((current or {}).get('averageValue'))}/{_canonical(target.get('averageValue'))}"
    if kind in ("Resource", "ContainerResource"):
        name = body.get("name") or ""
        if target.get("averageValue") is not None:
            return f"{name}: {_quantity_or_unknown((current or {}).get('averageValue'))}/{_canonical(target['averageValue'])}"
        now = (current or {}).get("averageUtilization")
        goal = target.get("averageUtilization")
        return f"{name}: {_quantity_or_unknown(now, '%')}/{'<auto>' if goal is None else f'{goal}%'}"
    return "<unknown type>"


def _field(metric: dict[str, Any]) -> str:
    return {"Resource": "resource", "Pods": "pods", "Object": "object", "External": "external",
            "ContainerResource": "containerResource"}.get(metric.get("type") or "", "resource")


HPA = Printer(
    (
        name_column(),
        Column("Reference", doc="Reference is the scaled object"),
        Column("Targets", doc="Targets are the current/target metric values"),
        Column("MinPods", doc=(_HPA + "Spec", "minReplicas")),
        Column("MaxPods", type="integer", doc=(_HPA + "Spec", "maxReplicas")),
        Column("Replicas", type="integer", doc=(_HPA + "Status", "currentReplicas")),
        age_column(),
    ),
    lambda obj, now: [
        dig(obj, "metadata", "name", default=""),
        f"{dig(obj, 'spec', 'scaleTargetRef', 'kind', default='')}/{dig(obj, 'spec', 'scaleTargetRef', 'name', default='')}",
        _targets(obj),
        str(dig(obj, "spec", "minReplicas", default=1) or "<unset>"),
        int(dig(obj, "spec", "maxReplicas", default=0) or 0),
        int(dig(obj, "status", "currentReplicas", default=0) or 0),
        object_age(obj, now),
    ],
)

PRINTERS = {"HorizontalPodAutoscaler": HPA}
