"""scheduling.k8s.io/v1: PriorityClasses (cluster-scoped, ``pc``).

A PriorityClass maps a name to the integer a pod's ``spec.priority`` gets
(see ``admission.priority``). Validation as upstream: user classes may not
exceed 1,000,000,000 nor take the ``system-`` prefix (reserved for the two
built-in classes, which the server creates at start-up); ``value`` and
``preemptionPolicy`` cannot change once set.
"""

from __future__ import annotations

from typing import Any

from k8py.api.errors import Cause
from k8py.apiserver.registry import ResourceDefinition
from k8py.apiserver.resources.strategies import StandardStrategy

__all__ = ["DEFINITIONS", "BUILTIN_PRIORITY_CLASSES", "HIGHEST_USER_DEFINABLE_PRIORITY", "SYSTEM_CRITICAL_PRIORITY"]

Object = dict[str, Any]

HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000
SYSTEM_CRITICAL_PRIORITY = 2 * HIGHEST_USER_DEFINABLE_PRIORITY

BUILTIN_PRIORITY_CLASSES: list[Object] = [
    {"metadata": {"name": "system-node-critical"}, "value": SYSTEM_CRITICAL_PRIORITY + 1000,
     "description": "Used for system critical pods that must not be moved from their current node."},
    {"metadata": {"name": "system-cluster-critical"}, "value": SYSTEM_CRITICAL_PRIORITY,
     "description": "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary."},
]
_BUILTIN = {pc["metadata"]["name"]: pc["value"] for pc in BUILTIN_PRIORITY_CLASSES}


class PriorityClassStrategy(StandardStrategy):
    def default(self, obj: Object) -> None:
        super().default(obj)
        obj.setdefault("preemptionPolicy", "PreemptLowerPriority")

    def validate(self, obj: Object) -> list[Cause]:
        causes = super().validate(obj)
        name = (obj.get("metadata") or {}).get("name") or ""
        value = obj.get("value")
        if not isinstance(value, int) or isinstance(value, bool):
            causes.append(Cause("FieldValueRequired", "Required value", "value"))
            return causes
        if name.startswith("system-"):
            if _BUILTIN.get(name) != value:
                causes.append(Cause("FieldValueForbidden", "Forbidden: priority class names with 'system-' prefix are reserved", "metadata.name"))
        elif value > HIGHEST_USER_DEFINABLE_PRIORITY:
            causes.append(Cause("FieldValueForbidden",
                                f"Forbidden: maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}", "value"))
        policy = obj.get("preemptionPolicy")
        if policy not in (None, "PreemptLowerPriority", "Never"):
            causes.append(Cause("FieldValueNotSupported",
                                f'Unsupported value: "{policy}": supported values: "Never", "PreemptLowerPriority"', "preemptionPolicy"))
        return causes

    def validate_update(self, obj: Object, old: Object) -> list[Cause]:
        causes = self.validate(obj)
        if obj.get("value") != old.get("value"):
            causes.append(Cause("FieldValueForbidden", "Forbidden: may not be changed in an update.", "value"))
        if obj.get("preemptionPolicy") != old.get("preemptionPolicy"):
            causes.append(Cause("FieldValueInvalid", f"Invalid value: {obj.get('preemptionPolicy')!r}: field is immutable", "preemptionPolicy"))
        return causes


DEFINITIONS = [
    ResourceDefinition(
        group="scheduling.k8s.io",
        version="v1",
        kind="PriorityClass",
        plural="priorityclasses",
        singular="priorityclass",
        namespaced=False,
        short_names=("pc",),
        strategy=PriorityClassStrategy("scheduling.k8s.io", "v1", "PriorityClass"),
        openapi_name="io.k8s.api.scheduling.v1.PriorityClass",
    ),
]
