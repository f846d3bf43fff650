"""Where the HPA reads its metrics: the three metrics APIs, as upstream's
``podautoscaler/metrics`` clients read them.

- ``metrics.k8s.io/v1beta1`` PodMetrics (the API server's own, as
  metrics-server): per pod, the sum of a resource over its containers (or one
  container's), with the sample's timestamp and window; a pod lacking the
  resource in any container has no sample.
- ``custom.metrics.k8s.io/v1beta2`` (an aggregated APIService, as
  prometheus-adapter): ``namespaces/NS/pods/*/METRIC?labelSelector=…`` for Pods
  metrics, ``namespaces/NS/RESOURCE.GROUP/NAME/METRIC`` for an Object
  (``namespaces/NS/metrics/METRIC`` for the Namespace itself); a
  ``metricLabelSelector`` when the metric has a selector; a sample with no
  ``windowSeconds`` covers one minute.
- ``external.metrics.k8s.io/v1beta1``: ``namespaces/NS/METRIC?labelSelector=…``,
  every item's value.

:class:`MetricsSource` is the seam the controller needs; values are integer
thousandths (``MilliValue``). Failures raise :class:`~.replicas.MetricError`
with upstream's message.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from k8py.api.errors import StatusError
from k8py.api.quantity import quantity_milli_value
from k8py.client.resources import POD_METRICS
from k8py.client.rest import RestClient
from k8py.controllers.pod_status import parse_time
from k8py.controllers.podautoscaler.replicas import MetricError, PodMetric

__all__ = ["MetricsSource", "RestMetricsClient", "parse_go_duration"]

CUSTOM = "/apis/custom.metrics.k8s.io/v1beta2"
EXTERNAL = "/apis/external.metrics.k8s.io/v1beta1"
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"([0-9]*\.?[0-9]+)(ns|us|µs|ms|s|m|h)")


def parse_go_duration(text: str | None, default: float = 0.0) -> float:
    """``1m30s`` / ``10.5s`` / ``500ms`` -> seconds."""
    if not text:
        return default
    parts = _PART.findall(text)
    return sum(float(n) * _UNITS[u] for n, u in parts) if parts else default


class MetricsSource(Protocol):
    async def resource_metric(self, namespace: str, selector: str, resource: str, container: str = "") -> dict[str, PodMetric]:
        """Pod name -> sample of ``resource`` (``GetResourceMetric``)."""

    async def pods_metric(self, namespace: str, metric: str, selector: str, metric_selector: str) -> dict[str, PodMetric]:
        """Pod name -> sample of a custom per-pod metric (``GetRawMetric``)."""

    async def object_metric(self, namespace: str, metric: str, ref: dict[str, Any], metric_selector: str) -> int:
        """One object's metric (``GetObjectMetric``)."""

    async def external_metric(self, namespace: str, metric: str, metric_selector: str) -> list[int]:
        """Every value of an external metric (``GetExternalMetric``)."""


def _selector_params(selector: str | None, metric_selector: str | None) -> list[tuple[str, str]]:
    params = []
    if selector is not None:
        params.append(("labelSelector", selector))
    if metric_selector:
        params.append(("metricLabelSelector", metric_selector))
    return params


class RestMetricsClient:
    def __init__(self, client: RestClient) -> None:
        self.client = client

    async def resource_metric(self, namespace: str, selector: str, resource: str, container: str = "") -> dict[str, PodMetric]:
        try:
            items = (await self.client.list(POD_METRICS, namespace, label_selector=selector or None)).get("items") or []
        except StatusError as err:
            raise MetricError(f"unable to fetch metrics from resource metrics API: {err.message}") from None
        if not items:
            raise MetricError("no metrics returned from resource metrics API")
        out: dict[str, PodMetric] = {}
        for item in items:
            meta = item.get("metadata") or {}
            containers = item.get("containers") or []
            if container:
                containers = [c for c in containers if c.get("name") == container]
                if not containers:
                    raise MetricError(f"failed to get container metrics: container {container} not present in metrics for pod "
                                      f"{meta.get('namespace')}/{meta.get('name')}")
            values = [(c.get("usage") or {}).get(resource) for c in containers]
            if not values or any(v is None for v in values):
                continue
            stamp = parse_time(item.get("timestamp"))
            out[meta["name"]] = PodMetric(sum(quantity_milli_value(v) for v in values),
                                          stamp.timestamp() if stamp else 0.0, parse_go_duration(item.get("window")))
        return out

    async def _custom(self, path: str, params: list[tuple[str, str]]) -> list[dict[str, Any]]:
        try:
            body = await self.client.request_json("GET", CUSTOM + path, params=params)
        except StatusError as err:
            raise MetricError(f"unable to fetch metrics from custom metrics API: {err.message}") from None
        except OSError as err:
            raise MetricError(f"unable to fetch metrics from custom metrics API: {err}") from None
        return list((body or {}).get("items") or [])

    async def pods_metric(self, namespace: str, metric: str, selector: str, metric_selector: str) -> dict[str, PodMetric]:
        items = await self._custom(f"/namespaces/{namespace}/pods/*/{metric}", _selector_params(selector or None, metric_selector))
        if not items:
            raise MetricError("no metrics returned from custom metrics API")
        out: dict[str, PodMetric] = {}
        for item in items:
            stamp = parse_time(item.get("timestamp"))
            window = item.get("windowSeconds")
            out[(item.get("describedObject") or {}).get("name") or ""] = PodMetric(
                quantity_milli_value(item.get("value") or 0), stamp.timestamp() if stamp else 0.0,
                float(window) if window is not None else 60.0)
        return out

    async def object_metric(self, namespace: str, metric: str, ref: dict[str, Any], metric_selector: str) -> int:
        group = (ref.get("apiVersion") or "").rpartition("/")[0]
        kind = ref.get("kind") or ""
        if kind == "Namespace" and not group:
            path = f"/namespaces/{namespace}/metrics/{metric}"
        else:
            try:
                found = await self.client.discovery.resource_for(kind, group=group)
            except StatusError as err:
                raise MetricError(f"unable to fetch metrics from custom metrics API: {err.message}") from None
            qualified = found.plural + (f".{found.group}" if found.group else "")
            path = f"/namespaces/{namespace}/{qualified}/{ref.get('name')}/{metric}"
        items = await self._custom(path, _selector_params(None, metric_selector))
        if len(items) != 1:
            raise MetricError("unable to fetch metrics from custom metrics API: the custom metrics API server returned "
                              f"{len(items)} results when we asked for exactly one")
        return quantity_milli_value(items[0].get("value") or 0)

    async def external_metric(self, namespace: str, metric: str, metric_selector: str) -> list[int]:
        try:
            body = await self.client.request_json("GET", f"{EXTERNAL}/namespaces/{namespace}/{metric}",
                                                  params=_selector_params(metric_selector or None, None))
        except StatusError as err:
            raise MetricError(f"unable to fetch metrics from external metrics API: {err.message}") from None
        except OSError as err:
            raise MetricError(f"unable to fetch metrics from external metrics API: {err}") from None
        items = (body or {}).get("items") or []
        if not items:
            raise MetricError("no metrics returned from external metrics API")
        return [quantity_milli_value(i.get("value") or 0) for i in items]
