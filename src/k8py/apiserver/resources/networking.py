"""networking.k8s.io/v1: Ingresses, IngressClasses, NetworkPolicies.

k8py runs no ingress controller and enforces no network policy, but these kinds are in every
conformant server's discovery and clients resolve them by kind, plural or short name (kr8s's
``get("ingress.networking.k8s.io")``, ``kubectl get ing,netpol``); controllers one installs
(an ingress controller) read and write them, an Ingress's load balancer through ``/status``.
Names, short names, scope and subresources follow upstream's v1.32 discovery document.

Validation as upstream where a consumer relies on it: an Ingress has a default backend or rules,
every path of a rule has a backend and a supported pathType; an IngressClass names its controller,
which never changes; a NetworkPolicy's policyTypes are Ingress or Egress.
"""

from __future__ import annotations

from typing import Any

from k8py.api.errors import Cause
from k8py.apiserver.registry import ResourceDefinition
from k8py.apiserver.resources.strategies import StandardStrategy

__all__ = ["DEFINITIONS"]

GROUP = "networking.k8s.io"
Object = dict[str, Any]
_PATH_TYPES = ("Exact", "ImplementationSpecific", "Prefix")


class IngressStrategy(StandardStrategy):
    def validate(self, obj: Object) -> list[Cause]:
        causes = super().validate(obj)
        spec = obj.get("spec") or {}
        rules = spec.get("rules") or []
        if not spec.get("defaultBackend") and not rules:
            causes.append(Cause("FieldValueInvalid", "Invalid value: either `defaultBackend` or `rules` must be specified", "spec"))
        for i, rule in enumerate(rules):
            for j, path in enumerate(((rule.get("http") or {}).get("paths")) or []):
                where = f"spec.rules[{i}].http.paths[{j}]"
                if path.get("pathType") not in _PATH_TYPES:
                    causes.append(Cause("FieldValueNotSupported", f'Unsupported value: "{path.get("pathType", "")}": supported values: '
                                        + ", ".join(f'"{t}"' for t in _PATH_TYPES), f"{where}.pathType"))
                if not path.get("backend"):
                    causes.append(Cause("FieldValueRequired", "Required value", f"{where}.backend"))
        return causes


class IngressClassStrategy(StandardStrategy):
    def validate(self, obj: Object) -> list[Cause]:
        causes = super().validate(obj)
        if not (obj.get("spec") or {}).get("controller"):
            causes.append(Cause("FieldValueRequired", "Required value", "spec.controller"))
        return causes

    def validate_update(self, obj: Object, old: Object) -> list[Cause]:
        causes = super().validate_update(obj, old)
        if (obj.get("spec") or {}).get("controller") != (old.get("spec") or {}).get("controller"):
            causes.append(Cause("FieldValueInvalid", "field is immutable", "spec.controller"))
        return causes


class NetworkPolicyStrategy(StandardStrategy):
    def validate(self, obj: Object) -> list[Cause]:
        causes = super().validate(obj)
        for i, kind in enumerate((obj.get("spec") or {}).get("policyTypes") or []):
            if kind not in ("Ingress", "Egress"):
                causes.append(Cause("FieldValueNotSupported", f'Unsupported value: "{kind}": supported values: "Egress", "Ingress"',
                                    f"spec.policyTypes[{i}]"))
        return causes


DEFINITIONS = [
    ResourceDefinition(
        group=GROUP, version="v1", kind="Ingress", plural="ingresses", singular="ingress", namespaced=True,
        short_names=("ing",), subresources=frozenset({"status"}),
        strategy=IngressStrategy(GROUP, "v1", "Ingress", has_status=True, tracks_generation=True),
        openapi_name="io.k8s.api.networking.v1.Ingress",
    ),
    ResourceDefinition(
        group=GROUP, version="v1", kind="IngressClass", plural="ingressclasses", singular="ingressclass", namespaced=False,
        strategy=IngressClassStrategy(GROUP, "v1", "IngressClass"),
        openapi_name="io.k8s.api.networking.v1.IngressClass",
    ),
    ResourceDefinition(
        group=GROUP, version="v1", kind="NetworkPolicy", plural="networkpolicies", singular="networkpolicy", namespaced=True,
        short_names=("netpol",),
        strategy=NetworkPolicyStrategy(GROUP, "v1", "NetworkPolicy", tracks_generation=True),
        openapi_name="io.k8s.api.networking.v1.NetworkPolicy",
    ),
]
