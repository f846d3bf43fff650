"""autoscaling/v2 and autoscaling/v1 HorizontalPodAutoscalers (``hpa``): one
stored object (the v2 form), two API versions, converted as upstream does.

- v2 is stored and preferred; defaults as upstream: ``minReplicas: 1`` and,
  with no metrics, CPU at 80% average utilization; a given ``behavior`` has
  its unset rules filled in (up: 0 s window, 4 pods or 100% per 15 s; down:
  100% per 15 s, no window so the controller's flag applies), an absent one
  stays absent (the controller then uses upstream's older rules).
- validation is ``k8py.apiserver.validation.autoscaling`` (on the stored v2
  form, whichever version was written).
- v1 is a view (``converter``): ``targetCPUUtilizationPercentage`` is the v2
  CPU Utilization metric, ``status.currentCPUUtilizationPercentage`` the
  current one; what v1 cannot say (other metrics, behavior, conditions,
  current metrics) rides in upstream's ``autoscaling.alpha.kubernetes.io/*``
  annotations, so a v1 read-modify-write keeps it.
"""

from __future__ import annotations

import copy
from typing import Any

import orjson

from k8py.api.errors import Cause
from k8py.apiserver.registry import ResourceDefinition
from k8py.apiserver.resources.strategies import StandardStrategy

__all__ = ["DEFINITIONS", "AutoscalingV1Converter"]

Object = dict[str, Any]
_ANN = "autoscaling.alpha.kubernetes.io/"
_METRICS, _CONDITIONS, _CURRENT, _BEHAVIOR = (_ANN + "metrics", _ANN + "conditions", _ANN + "current-metrics", _ANN + "behavior")


def _is_cpu_utilization(metric: Object) -> bool:
    res = metric.get("resource") or {}
    return metric.get("type") == "Resource" and res.get("name") == "cpu" and (res.get("target") or {}).get("type") == "Utilization"


_SCALE_UP = {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
             "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15}, {"type": "Percent", "value": 100, "periodSeconds": 15}]}
# no scale-down window: the controller's --horizontal-pod-autoscaler-downscale-stabilization applies
_SCALE_DOWN = {"selectPolicy": "Max", "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}


def _rules(given: Any, default: Object) -> Object:
    """``GenerateHPAScale{Up,Down}Rules``: the default rules, or the given ones with their unset fields filled in."""
    if not isinstance(given, dict):
        return copy.deepcopy(default)
    out = dict(given)
    for key, value in default.items():
        if out.get(key) is None:
            out[key] = copy.deepcopy(value)
    return out


class HPAStrategy(StandardStrategy):
    def default(self, obj: Object) -> None:
        super().default(obj)
        spec = obj.setdefault("spec", {})
        spec.setdefault("minReplicas", 1)
        if not spec.get("metrics"):
            spec["metrics"] = [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]
        behavior = spec.get("behavior")
        if isinstance(behavior, dict):  # upstream SetDefaults_HorizontalPodAutoscalerBehavior: only when given
            behavior["scaleUp"] = _rules(behavior.get("scaleUp"), _SCALE_UP)
            behavior["scaleDown"] = _rules(behavior.get("scaleDown"), _SCALE_DOWN)

    def _semantic(self, obj: Object, old: Object | None) -> list[Cause]:
        """Checked in the v2 form, whichever version was written (upstream validates its internal form)."""
        return super()._semantic(_as_v2(obj), None if old is None else _as_v2(old))


def _as_v2(obj: Object) -> Object:
    return AutoscalingV1Converter().to_storage(obj) if obj.get("apiVersion") == "autoscaling/v1" else obj


class AutoscalingV1Converter:
    """autoscaling/v1 view <-> stored autoscaling/v2."""

    field_aliases: dict[str, str] = {}

    def to_storage(self, obj: Object) -> Object:
        out = copy.deepcopy({k: v for k, v in obj.items() if k not in ("apiVersion", "kind")})
        out = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", **out}
        meta = out.setdefault("metadata", {})
        ann = dict(meta.get("annotations") or {})
        spec = dict(out.get("spec") or {})
        target = spec.pop("targetCPUUtilizationPercentage", None)
        metrics = orjson.loads(ann.pop(_METRICS)) if _METRICS in ann else []
        metrics = [m for m in metrics if not _is_cpu_utilization(m)]
        if target is not None:
            metrics.insert(0, {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": target}}})
        if metrics:
            spec["metrics"] = metrics
        if _BEHAVIOR in ann:
            spec["behavior"] = orjson.loads(ann.pop(_BEHAVIOR))
        out["spec"] = spec
        status = dict(out.get("status") or {})
        current = status.pop("currentCPUUtilizationPercentage", None)
        current_metrics = orjson.loads(ann.pop(_CURRENT)) if _CURRENT in ann else []
        if current is not None:
            current_metrics = [m for m in current_metrics if not (m.get("type") == "Resource" and (m.get("resource") or {}).get("name") == "cpu")]
            current_metrics.insert(0, {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": current}}})
        if current_metrics:
            status["currentMetrics"] = current_metrics
        if _CONDITIONS in ann:
            status["conditions"] = orjson.loads(ann.pop(_CONDITIONS))
        if status or "status" in out:
            out["status"] = status
        if ann:
            meta["annotations"] = ann
        else:
            meta.pop("annotations", None)
        return out

    def from_storage(self, obj: Object) -> Object:
        out = copy.deepcopy({k: v for k, v in obj.items() if k not in ("apiVersion", "kind")})
        out = {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", **out}
        meta = out.setdefault("metadata", {})
        ann = dict(meta.get("annotations") or {})
        spec = dict(out.get("spec") or {})
        metrics = spec.pop("metrics", None) or []
        cpu = next((m for m in metrics if _is_cpu_utilization(m)), None)
        if cpu is not None:
            spec["targetCPUUtilizationPercentage"] = cpu["resource"]["target"].get("averageUtilization")
        others = [m for m in metrics if m is not cpu]
        if others:
            ann[_METRICS] = orjson.dumps(others).decode()
        if spec.get("behavior"):
            ann[_BEHAVIOR] = orjson.dumps(spec.pop("behavior")).decode()
        spec.pop("behavior", None)
        out["spec"] = spec
        status = dict(out.get("status") or {})
        current = status.pop("currentMetrics", None) or []
        for m in current:
            if m.get("type") == "Resource" and (m.get("resource") or {}).get("name") == "cpu":
                value = ((m.get("resource") or {}).get("current") or {}).get("averageUtilization")
                if value is not None:
                    status["currentCPUUtilizationPercentage"] = value
        if current:
            ann[_CURRENT] = orjson.dumps(current).decode()
        if status.get("conditions"):
            ann[_CONDITIONS] = orjson.dumps(status.pop("conditions")).decode()
        status.pop("conditions", None)
        if "status" in out:
            out["status"] = status
        if ann:
            meta["annotations"] = ann
        return out


def _hpa(version: str, **kw: Any) -> ResourceDefinition:
    return ResourceDefinition(
        group="autoscaling", version=version, kind="HorizontalPodAutoscaler", plural="horizontalpodautoscalers",
        singular="horizontalpodautoscaler", namespaced=True, short_names=("hpa",), categories=("all",),
        subresources=frozenset({"status"}),
        strategy=HPAStrategy("autoscaling", "v2", "HorizontalPodAutoscaler", has_status=True, tracks_generation=True),
        openapi_name=f"io.k8s.api.autoscaling.{version}.HorizontalPodAutoscaler", storage_resource="horizontalpodautoscalers",
        **kw,
    )


DEFINITIONS = [_hpa("v2"), _hpa("v1", converter=AutoscalingV1Converter())]
