"""policy/v1: PodDisruptionBudgets (``pdb``) and the ``Eviction`` that
``pods/eviction`` accepts (see ``handlers.eviction``).

A budget names pods by ``selector`` and says how many may be down through
``minAvailable`` or ``maxUnavailable`` (an integer or a percentage; not both,
as upstream validates). Its status is the disruption controller's
(``controllers.disruption``); ``status.disruptedPods`` is also written by the
eviction subresource, which counts down ``disruptionsAllowed`` as it evicts.
``metadata.generation`` moves on spec changes, so an eviction can tell that
the controller has not seen the newest spec yet (``observedGeneration``).
"""

from __future__ import annotations

import re
from typing import Any

from k8py.api.errors import Cause
from k8py.apiserver.registry import ResourceDefinition
from k8py.apiserver.resources.strategies import StandardStrategy

__all__ = ["DEFINITIONS", "PodDisruptionBudgetStrategy"]

Object = dict[str, Any]
_PERCENT = re.compile(r"^[0-9]+%$")
_POLICIES = ("IfHealthyBudget", "AlwaysAllow")


def _int_or_percent(value: Any, field: str) -> list[Cause]:
    if isinstance(value, bool):
        return [Cause("FieldValueInvalid", f"Invalid value: {value!r}: must be an integer or percentage", field)]
    if isinstance(value, int):
        if value < 0:
            return [Cause("FieldValueInvalid", f"Invalid value: {value}: must be greater than or equal to 0", field)]
        return []
    if isinstance(value, str) and _PERCENT.match(value):
        if int(value[:-1]) > 100:
            return [Cause("FieldValueInvalid", f'Invalid value: "{value}": must not be greater than 100%', field)]
        return []
    return [Cause("FieldValueInvalid", f"Invalid value: {value!r}: a valid percent string must be a numeric string followed by an ending '%'", field)]


class PodDisruptionBudgetStrategy(StandardStrategy):
    def validate(self, obj: Object) -> list[Cause]:
        return super().validate(obj) + self._spec(obj)

    def validate_update(self, obj: Object, old: Object) -> list[Cause]:
        return super().validate_update(obj, old) + self._spec(obj)

    def _spec(self, obj: Object) -> list[Cause]:
        spec = obj.get("spec") or {}
        causes: list[Cause] = []
        if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
            causes.append(Cause("FieldValueInvalid", "Invalid value: \"\": minAvailable and maxUnavailable cannot be both set", "spec"))
        for name in ("minAvailable", "maxUnavailable"):
            if spec.get(name) is not None:
                causes += _int_or_percent(spec[name], f"spec.{name}")
        policy = spec.get("unhealthyPodEvictionPolicy")
        if policy is not None and policy not in _POLICIES:
            causes.append(Cause("FieldValueNotSupported",
                                f'Unsupported value: "{policy}": supported values: "AlwaysAllow", "IfHealthyBudget"',
                                "spec.unhealthyPodEvictionPolicy"))
        return causes


DEFINITIONS = [
    ResourceDefinition(
        group="policy",
        version="v1",
        kind="PodDisruptionBudget",
        plural="poddisruptionbudgets",
        singular="poddisruptionbudget",
        namespaced=True,
        short_names=("pdb",),
        subresources=frozenset({"status"}),
        strategy=PodDisruptionBudgetStrategy("policy", "v1", "PodDisruptionBudget", has_status=True, tracks_generation=True),
        openapi_name="io.k8s.api.policy.v1.PodDisruptionBudget",
    ),
]
