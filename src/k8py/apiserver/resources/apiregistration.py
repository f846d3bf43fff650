"""apiregistration.k8s.io/v1: APIServices, the aggregation layer's routing table.

An APIService named ``<version>.<group>`` says who serves that group/version:
``spec.service`` nil means this server (a *local* APIService, one per
built-in group/version, kept by :mod:`k8py.apiserver.aggregator`); a Service
reference means another API server, reached through that Service with TLS
(``caBundle`` or ``insecureSkipTLSVerify``). Validation as upstream's
``pkg/apis/apiregistration/validation``: the name must be version.group,
priorities in range, caBundle and insecureSkipTLSVerify exclusive.
"""

from __future__ import annotations

from typing import Any

from k8py.api.errors import Cause
from k8py.apiserver.registry import ResourceDefinition
from k8py.apiserver.resources.strategies import StandardStrategy

__all__ = ["DEFINITIONS", "GROUP"]

GROUP = "apiregistration.k8s.io"
Object = dict[str, Any]


class APIServiceStrategy(StandardStrategy):
    def __init__(self) -> None:
        super().__init__(GROUP, "v1", "APIService", has_status=True)

    def initial_status(self, obj: Object) -> Object | None:
        if (obj.get("spec") or {}).get("service"):
            return {}  # the aggregator's availability check fills it
        # served by this server: always available (upstream's availability controller says so at once)
        return {"conditions": [{"type": "Available", "status": "True",
                                "lastTransitionTime": (obj.get("metadata") or {}).get("creationTimestamp"),
                                "reason": "Local", "message": "Local APIServices are always available"}]}

    def default(self, obj: Object) -> None:
        service = (obj.get("spec") or {}).get("service")
        if isinstance(service, dict):
            service.setdefault("port", 443)

    def validate(self, obj: Object) -> list[Cause]:
        return self._validate(obj)

    def validate_update(self, obj: Object, old: Object) -> list[Cause]:
        return self._validate(obj)

    def _validate(self, obj: Object) -> list[Cause]:
        name = (obj.get("metadata") or {}).get("name") or ""
        spec = obj.get("spec") or {}
        causes: list[Cause] = []
        version, group = spec.get("version") or "", spec.get("group") or ""
        if not version:
            causes.append(Cause("FieldValueRequired", "Required value", "spec.version"))
        if name and version and name != f"{version}.{group}":
            causes.append(Cause("FieldValueInvalid", f'Invalid value: "{name}": must be `spec.version+"."+spec.group`: "{version}.{group}"', "metadata.name"))
        group_min = spec.get("groupPriorityMinimum")
        if not isinstance(group_min, int) or not 1 <= group_min <= 20000:
            causes.append(Cause("FieldValueInvalid", f"Invalid value: {group_min}: must be positive and less than 20000", "spec.groupPriorityMinimum"))
        version_priority = spec.get("versionPriority")
        if not isinstance(version_priority, int) or not 1 <= version_priority <= 1000:
            causes.append(Cause("FieldValueInvalid", f"Invalid value: {version_priority}: must be positive and less than 1000", "spec.versionPriority"))
        service = spec.get("service")
        if service is None:
            if spec.get("insecureSkipTLSVerify"):
                causes.append(Cause("FieldValueInvalid", "Invalid value: true: must not be set if service is not set", "spec.insecureSkipTLSVerify"))
            if spec.get("caBundle"):
                causes.append(Cause("FieldValueInvalid", "Invalid value: \"<omitted>\": must not be set if service is not set", "spec.caBundle"))
        else:
            if not group:
                causes.append(Cause("FieldValueRequired", "Required value: only v1 may have an empty group and it better be legacy kube", "spec.group"))
            if not service.get("namespace"):
                causes.append(Cause("FieldValueRequired", "Required value", "spec.service.namespace"))
            if not service.get("name"):
                causes.append(Cause("FieldValueRequired", "Required value", "spec.service.name"))
            port = service.get("port")
            if not isinstance(port, int) or not 1 <= port <= 65535:
                causes.append(Cause("FieldValueInvalid", f"Invalid value: {port}: port is not valid: must be between 1 and 65535, inclusive", "spec.service.port"))
            if spec.get("insecureSkipTLSVerify") and spec.get("caBundle"):
                causes.append(Cause("FieldValueInvalid", "Invalid value: true: may not be true if caBundle is present", "spec.insecureSkipTLSVerify"))
        return causes


DEFINITIONS = [
    ResourceDefinition(
        group=GROUP, version="v1", kind="APIService", plural="apiservices", singular="apiservice",
        namespaced=False, subresources=frozenset({"status"}), categories=("api-extensions",),
        strategy=APIServiceStrategy(), openapi_name="io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIService",
    ),
]
