"""core/v1 ResourceQuotas (``quota``) and LimitRanges (``limits``).

Served here; enforced by ``admission.resource_quota`` and
``admission.limit_ranger``. A quota's ``status`` (``hard`` copied from the
spec, ``used`` recomputed) is the resource-quota controller's, and admission
charges new objects to ``status.used`` as it admits them. A LimitRange is
defaulted when stored, as upstream (``default`` from ``max``,
``defaultRequest`` from ``default`` or ``min``).
"""

from __future__ import annotations

from typing import Any

from k8py.apiserver.registry import ResourceDefinition
from k8py.apiserver.resources.strategies import StandardStrategy

__all__ = ["DEFINITIONS", "default_limit_range"]

Object = dict[str, Any]


def default_limit_range(obj: Object) -> None:
    """Upstream's LimitRange defaulting, applied when the LimitRange is stored."""
    for item in (obj.get("spec") or {}).get("limits") or ():
        if not isinstance(item, dict) or item.get("type") != "Container":
            continue
        for name, value in (item.get("max") or {}).items():
            item.setdefault("default", {}).setdefault(name, value)
        for name, value in (item.get("default") or {}).items():
            item.setdefault("defaultRequest", {}).setdefault(name, value)
        for name, value in (item.get("min") or {}).items():
            item.setdefault("defaultRequest", {}).setdefault(name, value)


class LimitRangeStrategy(StandardStrategy):
    def default(self, obj: dict[str, Any]) -> None:
        super().default(obj)
        default_limit_range(obj)


DEFINITIONS = [
    ResourceDefinition(
        group="", version="v1", kind="ResourceQuota", plural="resourcequotas", singular="resourcequota",
        namespaced=True, short_names=("quota",), subresources=frozenset({"status"}),
        strategy=StandardStrategy("", "v1", "ResourceQuota", has_status=True),
        openapi_name="io.k8s.api.core.v1.ResourceQuota",
    ),
    ResourceDefinition(
        group="", version="v1", kind="LimitRange", plural="limitranges", singular="limitrange",
        namespaced=True, short_names=("limits",), strategy=LimitRangeStrategy("", "v1", "LimitRange"),
        openapi_name="io.k8s.api.core.v1.LimitRange",
    ),
]
