"""flowcontrol.apiserver.k8s.io/v1: FlowSchemas and PriorityLevelConfigurations (cluster-scoped).

What API Priority and Fairness (:mod:`k8py.apiserver.overload`) reads. Defaults
and validation as upstream's for the fields k8py acts on: a FlowSchema's
``matchingPrecedence`` (default 1000, 1..10000) and its level's name; a
PriorityLevelConfiguration's ``type`` (Exempt or Limited, with the matching
member), ``nominalConcurrencyShares`` (default 30), ``lendablePercent``
(0..100) and, for ``limitResponse.type: Queue``, ``queues`` (default 64),
``handSize`` (default 8, at most ``queues``) and ``queueLengthLimit``
(default 50). Both have a status subresource.
"""

from __future__ import annotations

from typing import Any

from k8py.api.errors import Cause
from k8py.apiserver.registry import ResourceDefinition
from k8py.apiserver.resources.strategies import StandardStrategy

__all__ = ["DEFINITIONS"]

GROUP = "flowcontrol.apiserver.k8s.io"
Object = dict[str, Any]


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class FlowSchemaStrategy(StandardStrategy):
    def __init__(self) -> None:
        super().__init__(GROUP, "v1", "FlowSchema", has_status=True, tracks_generation=True)

    def default(self, obj: Object) -> None:
        super().default(obj)
        spec = obj.setdefault("spec", {})
        spec.setdefault("matchingPrecedence", 1000)

    def validate(self, obj: Object) -> list[Cause]:
        causes = super().validate(obj)
        spec = obj.get("spec") or {}
        precedence = spec.get("matchingPrecedence")
        if not _int(precedence) or not 1 <= precedence <= 10000:
            causes.append(Cause("FieldValueInvalid", f"Invalid value: {precedence!r}: must be between 1 and 10000, inclusive",
                                "spec.matchingPrecedence"))
        if not ((spec.get("priorityLevelConfiguration") or {}).get("name")):
            causes.append(Cause("FieldValueRequired", "Required value: must reference a priority level",
                                "spec.priorityLevelConfiguration.name"))
        method = (spec.get("distinguisherMethod") or {}).get("type")
        if method not in (None, "ByUser", "ByNamespace"):
            causes.append(Cause("FieldValueNotSupported", f'Unsupported value: "{method}": supported values: "ByNamespace", "ByUser"',
                                "spec.distinguisherMethod.type"))
        return causes


class PriorityLevelStrategy(StandardStrategy):
    def __init__(self) -> None:
        super().__init__(GROUP, "v1", "PriorityLevelConfiguration", has_status=True, tracks_generation=True)

    def default(self, obj: Object) -> None:
        super().default(obj)
        spec = obj.setdefault("spec", {})
        if spec.get("type") == "Limited":
            limited = spec.setdefault("limited", {})
            limited.setdefault("nominalConcurrencyShares", 30)
            limited.setdefault("lendablePercent", 0)
            response = limited.setdefault("limitResponse", {"type": "Reject"})
            if response.get("type") == "Queue":
                queuing = response.setdefault("queuing", {})
                queuing.setdefault("queues", 64)
                queuing.setdefault("handSize", 8)
                queuing.setdefault("queueLengthLimit", 50)

    def validate(self, obj: Object) -> list[Cause]:
        causes = super().validate(obj)
        spec = obj.get("spec") or {}
        kind = spec.get("type")
        if kind not in ("Exempt", "Limited"):
            causes.append(Cause("FieldValueNotSupported", f'Unsupported value: "{kind}": supported values: "Exempt", "Limited"', "spec.type"))
            return causes
        if kind == "Limited":
            limited = spec.get("limited")
            if not isinstance(limited, dict):
                causes.append(Cause("FieldValueRequired", "Required value: must not be empty when type is Limited", "spec.limited"))
                return causes
            shares = limited.get("nominalConcurrencyShares")
            if not _int(shares) or shares < 0:
                causes.append(Cause("FieldValueInvalid", f"Invalid value: {shares!r}: must be a non-negative integer",
                                    "spec.limited.nominalConcurrencyShares"))
            lendable = limited.get("lendablePercent")
            if not _int(lendable) or not 0 <= lendable <= 100:
                causes.append(Cause("FieldValueInvalid", f"Invalid value: {lendable!r}: must be between 0 and 100, inclusive",
                                    "spec.limited.lendablePercent"))
            borrowing = limited.get("borrowingLimitPercent")
            if borrowing is not None and (not _int(borrowing) or borrowing < 0):
                causes.append(Cause("FieldValueInvalid", f"Invalid value: {borrowing!r}: if specified, must be a non-negative integer",
                                    "spec.limited.borrowingLimitPercent"))
            response = limited.get("limitResponse") or {}
            if response.get("type") not in ("Queue", "Reject"):
                causes.append(Cause("FieldValueNotSupported", f'Unsupported value: "{response.get("type")}": supported values: "Queue", "Reject"',
                                    "spec.limited.limitResponse.type"))
            elif response.get("type") == "Queue":
                causes += _validate_queuing(response.get("queuing") or {})
        elif spec.get("limited") is not None:
            causes.append(Cause("FieldValueForbidden", "Forbidden: must be nil if the type is not Limited", "spec.limited"))
        return causes


def _validate_queuing(q: Object) -> list[Cause]:
    causes, path = [], "spec.limited.limitResponse.queuing"
    queues, hand, length = q.get("queues"), q.get("handSize"), q.get("queueLengthLimit")
    if not _int(queues) or queues <= 0:
        causes.append(Cause("FieldValueInvalid", f"Invalid value: {queues!r}: must be positive", f"{path}.queues"))
    if not _int(length) or length <= 0:
        causes.append(Cause("FieldValueInvalid", f"Invalid value: {length!r}: must be positive", f"{path}.queueLengthLimit"))
    if not _int(hand) or hand <= 0:
        causes.append(Cause("FieldValueInvalid", f"Invalid value: {hand!r}: must be positive", f"{path}.handSize"))
    elif _int(queues) and hand > queues:
        causes.append(Cause("FieldValueInvalid", f"Invalid value: {hand}: should not be greater than queues ({queues})",
                            f"{path}.handSize"))
    return causes


DEFINITIONS = [
    ResourceDefinition(group=GROUP, version="v1", kind="FlowSchema", plural="flowschemas", singular="flowschema",
                       namespaced=False, subresources=frozenset({"status"}), strategy=FlowSchemaStrategy(),
                       openapi_name="io.k8s.api.flowcontrol.v1.FlowSchema"),
    ResourceDefinition(group=GROUP, version="v1", kind="PriorityLevelConfiguration", plural="prioritylevelconfigurations",
                       singular="prioritylevelconfiguration", namespaced=False, subresources=frozenset({"status"}),
                       strategy=PriorityLevelStrategy(), openapi_name="io.k8s.api.flowcontrol.v1.PriorityLevelConfiguration"),
]
