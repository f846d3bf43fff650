"""Where the HPA reads resource usage: ``metrics.k8s.io`` PodMetrics.

:class:`MetricsSource` is the narrow seam the controller needs (usage per pod
of one resource, summed over its containers); :class:`ResourceMetricsClient`
is the real one, listing PodMetrics through the API server (which computes
them from the kubelets, as metrics-server would).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Protocol

from k8py.api.quantity import parse_quantity
from k8py.client.resources import POD_METRICS
from k8py.client.rest import RestClient

__all__ = ["MetricsSource", "ResourceMetricsClient"]


class MetricsSource(Protocol):
    async def pod_usage(self, namespace: str, selector: str, resource: str) -> dict[str, Fraction]:
        """Pod name -> usage of ``resource`` (cores for cpu, bytes for memory)."""


class ResourceMetricsClient:
    def __init__(self, client: RestClient) -> None:
        self.client = client

    async def pod_usage(self, namespace: str, selector: str, resource: str) -> dict[str, Fraction]:
        items = (await self.client.list(POD_METRICS, namespace, label_selector=selector or None)).get("items") or []
        out: dict[str, Fraction] = {}
        for item in items:
            total = Fraction(0)
            for c in item.get("containers") or ():
                value = (c.get("usage") or {}).get(resource)
                if value is not None:
                    total += parse_quantity(value)
            out[item["metadata"]["name"]] = total
        return out
