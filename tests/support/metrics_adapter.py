"""A small custom and external metrics adapter for tests, as prometheus-adapter
serves them: ``custom.metrics.k8s.io/v1beta2`` and ``external.metrics.k8s.io/v1beta1``
over HTTPS, to be registered with the API server through APIServices (the
aggregator proxies to it like to any extension API server).

The values come from :class:`MetricValues`, which the test sets (the
adapter's "Prometheus"): a total per pod metric, spread evenly over
the pods the ``labelSelector`` selects (listed from the API server), as
requests spread over a Service's pods, a value per
described object, and the values of each external metric. Every request is
logged (path and query) so a test can check what the HPA asked.
"""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from aiohttp import web

__all__ = ["MetricValues", "metrics_adapter_app", "apiservices"]

CUSTOM, EXTERNAL = "custom.metrics.k8s.io/v1beta2", "external.metrics.k8s.io/v1beta1"
VALUES: web.AppKey["MetricValues"] = web.AppKey("values")


@dataclass
class MetricValues:
    api_url: str  # where pods are listed (an unsecured API server URL)
    pods: dict[str, int] = field(default_factory=dict)  # metric -> total, spread evenly over the selected pods
    objects: dict[tuple[str, str, str], str] = field(default_factory=dict)  # (resource, name, metric) -> value
    external: dict[str, list[tuple[dict[str, str], str]]] = field(default_factory=dict)  # metric -> [(labels, value)]
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def set(self, **kw: Any) -> None:
        with self.lock:
            for key, value in kw.items():
                setattr(self, key, value)


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _not_found(what: str) -> web.Response:
    return web.json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                              "message": f"the server could not find the metric {what}", "reason": "NotFound",
                              "code": 404}, status=404)


def _matches(labels: dict[str, str], selector: str) -> bool:
    pairs = [p.split("=", 1) for p in selector.split(",") if p]
    return all(labels.get(k) == v for k, v in pairs)


def metrics_adapter_app(values: MetricValues) -> web.Application:
    app = web.Application()
    app[VALUES] = values

    def log(request: web.Request) -> None:
        with values.lock:
            values.requests.append((request.path, dict(request.query)))

    async def custom_discovery(request: web.Request) -> web.Response:
        names = [f"pods/{m}" for m in values.pods] + [f"{r}/{m}" for r, _, m in values.objects]
        return web.json_response({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": CUSTOM, "resources": [
            {"name": n, "singularName": "", "namespaced": True, "kind": "MetricValueList", "verbs": ["get"]} for n in names]})

    async def external_discovery(request: web.Request) -> web.Response:
        return web.json_response({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": EXTERNAL, "resources": [
            {"name": m, "singularName": "", "namespaced": True, "kind": "ExternalMetricValueList", "verbs": ["get"]}
            for m in values.external]})

    def list_pods(namespace: str, selector: str) -> list[str]:
        query = urllib.parse.urlencode({"labelSelector": selector}) if selector else ""
        with urllib.request.urlopen(f"{values.api_url}/api/v1/namespaces/{namespace}/pods?{query}", timeout=30) as reply:
            items = json.loads(reply.read())["items"]
        return [p["metadata"]["name"] for p in items if not p["metadata"].get("deletionTimestamp")]

    async def custom_metric(request: web.Request) -> web.Response:
        log(request)
        ns, resource, name, metric = (request.match_info[k] for k in ("ns", "resource", "name", "metric"))
        selector = request.query.get("metricLabelSelector")
        stamp = _now()
        if resource == "pods" and name == "*":
            with values.lock:
                total = values.pods.get(metric)
            if total is None:
                return _not_found(f"pods/{metric}")
            pods = await asyncio.to_thread(list_pods, ns, request.query.get("labelSelector", ""))
            value = f"{total * 1000 // max(len(pods), 1)}m"
            items = [{"describedObject": {"kind": "Pod", "namespace": ns, "name": p, "apiVersion": "/v1"},
                      "metric": {"name": metric, **({"selector": selector} if selector else {})},
                      "timestamp": stamp, "windowSeconds": 0, "value": value} for p in pods]
        else:
            with values.lock:
                value = values.objects.get((resource, name, metric))
            if value is None:
                return _not_found(f"{resource}/{name}/{metric}")
            items = [{"describedObject": {"kind": resource, "namespace": ns, "name": name},
                      "metric": {"name": metric}, "timestamp": stamp, "windowSeconds": 60, "value": value}]
        return web.json_response({"kind": "MetricValueList", "apiVersion": CUSTOM, "metadata": {}, "items": items})

    async def external_metric(request: web.Request) -> web.Response:
        log(request)
        metric, selector = request.match_info["metric"], request.query.get("labelSelector", "")
        with values.lock:
            series = values.external.get(metric)
        if series is None:
            return _not_found(metric)
        items = [{"metricName": metric, "metricLabels": labels, "timestamp": _now(), "value": value}
                 for labels, value in series if _matches(labels, selector)]
        return web.json_response({"kind": "ExternalMetricValueList", "apiVersion": EXTERNAL, "metadata": {}, "items": items})

    app.router.add_get(f"/apis/{CUSTOM}", custom_discovery)
    app.router.add_get(f"/apis/{EXTERNAL}", external_discovery)
    app.router.add_get(f"/apis/{CUSTOM}/namespaces/{{ns}}/{{resource}}/{{name}}/{{metric}}", custom_metric)
    app.router.add_get(f"/apis/{EXTERNAL}/namespaces/{{ns}}/{{metric}}", external_metric)
    return app


def apiservices(namespace: str, service: str, port: int, ca_bundle: str) -> list[dict[str, Any]]:
    """The Service, its Endpoints (the adapter on loopback) and the two APIServices."""
    def apiservice(group: str, version: str) -> dict[str, Any]:
        return {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": f"{version}.{group}"},
                "spec": {"group": group, "version": version, "groupPriorityMinimum": 100, "versionPriority": 100,
                         "service": {"namespace": namespace, "name": service}, "caBundle": ca_bundle}}

    return [
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": service, "namespace": namespace},
         "spec": {"ports": [{"port": 443, "targetPort": 6443}]}},
        {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": service, "namespace": namespace},
         "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"port": port}]}]},
        apiservice("custom.metrics.k8s.io", "v1beta2"),
        apiservice("external.metrics.k8s.io", "v1beta1"),
    ]
