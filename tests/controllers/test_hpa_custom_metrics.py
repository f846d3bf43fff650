"""HPAs on Pods, Object and External metrics (autoscaling/v2), read through
``custom.metrics.k8s.io`` and ``external.metrics.k8s.io``: a real metrics
adapter (tests/support/metrics_adapter.py, an HTTPS server as
prometheus-adapter is) registered with APIServices and reached through the
API server's aggregator; the real controller, ReplicaSet controller, scale
subresource and kubectl. Figures follow upstream's arithmetic: per-pod
averages, object value over target, external sums per replica."""

from __future__ import annotations

import asyncio
from typing import Any, Iterator

import pytest
import yaml

from k8py.client.resource import Resource
from k8py.client.resources import CORE_EVENTS, HORIZONTAL_POD_AUTOSCALERS, NODES, REPLICASETS
from k8py.controllers.context import ControllerOptions
from tests.controllers.conftest import eventually, running
from tests.support.kube import Kubectl
from tests.support.metrics_adapter import MetricValues, apiservices, metrics_adapter_app
from tests.support.pod_driver import PodDriver
from tests.support.servers import ServerThread, sqlite_storage
from tests.support.webhook_server import HTTPSServer

pytestmark = pytest.mark.kubectl

SELECTOR = {"matchLabels": {"queue": "jobs"}}
GO_SELECTOR = "&LabelSelector{MatchLabels:map[string]string{queue: jobs,},MatchExpressions:[]LabelSelectorRequirement{},}"


@pytest.fixture
def server(tmp_path) -> Iterator[ServerThread]:  # the aggregator checks APIServices every second
    with ServerThread(sqlite_storage(str(tmp_path / "data")), bookmark_interval=1.0, apiservice_check_interval=1.0) as s:
        yield s


def _rs() -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}


def _hpa() -> dict[str, Any]:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web"}, "minReplicas": 1, "maxReplicas": 10,
                     "metrics": [
                         {"type": "Pods", "pods": {"metric": {"name": "requests_per_second"},
                                                   "target": {"type": "AverageValue", "averageValue": "10"}}},
                         {"type": "Object", "object": {"describedObject": {"apiVersion": "v1", "kind": "Service", "name": "web"},
                                                       "metric": {"name": "hits"}, "target": {"type": "Value", "value": "100"}}},
                         {"type": "External", "external": {"metric": {"name": "queue_messages", "selector": SELECTOR},
                                                           "target": {"type": "AverageValue", "averageValue": "30"}}}]}}


async def test_pods_object_and_external_metrics_from_an_aggregated_adapter_scale_the_target(server, client, start_manager, tmp_path):
    values = MetricValues(api_url=server.url)
    values.set(pods={"requests_per_second": 20}, objects={("services", "web", "hits"): "50"},
               external={"queue_messages": [({"queue": "jobs"}, "30"), ({"queue": "other"}, "900")]})
    kubectl = Kubectl(server.url, str(tmp_path / "home"))
    with HTTPSServer(metrics_adapter_app(values), dns_names=("adapter.default.svc",)) as adapter:
        await asyncio.to_thread(kubectl.run, "apply", "-f", "-",
                                input=yaml.safe_dump_all(apiservices("default", "adapter", adapter.port, adapter.ca_bundle)))

        async def served() -> Any:
            try:
                return await client.request_json("GET", "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_messages")
            except Exception:
                return None

        await eventually(served, timeout=60)
        await client.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
        await start_manager("replicaset", "horizontalpodautoscaling", options=ControllerOptions(extra={"hpa_sync_period": 0.3}))
        async with running(PodDriver(client, node_name="n1").run(), "driver"):
            await client.create(REPLICASETS, _rs())
            await client.create(HORIZONTAL_POD_AUTOSCALERS, _hpa())

            async def replicas(n: int, per_pod: str, queue_per_replica: str) -> Any:
                """Settled at ``n`` with every pod measured (``per_pod`` requests/s each) and the
                target's status caught up (the queue length is divided by its status replicas)."""
                obj = await client.get(HORIZONTAL_POD_AUTOSCALERS, "default", "web")
                status = obj.get("status") or {}
                current = status.get("currentMetrics") or [{}, {}, {}]
                settled = status.get("desiredReplicas") == n and status.get("currentReplicas") == n
                pods, queue = (current[0].get("pods") or {}).get("current"), (current[2].get("external") or {}).get("current")
                return obj if settled and pods == {"averageValue": per_pod} and queue == {"averageValue": queue_per_replica} else None

            async def rescaled(message: str) -> bool:
                events = (await client.list(CORE_EVENTS, "default"))["items"]
                return any(e["reason"] == "SuccessfulRescale" and e["message"] == message for e in events)

            # 20 requests/s on one pod against 10 per pod: two pods; the Service's 50 hits of 100 and the queue's 30 per pod
            # of 30 say one
            await eventually(lambda: rescaled("New size: 2; reason: pods metric requests_per_second above target"), timeout=60)
            obj = await eventually(lambda: replicas(2, "10", "15"), timeout=60)
            current = obj["status"]["currentMetrics"]
            assert current[0] == {"type": "Pods", "pods": {"metric": {"name": "requests_per_second"}, "current": {"averageValue": "10"}}}
            assert current[1]["object"]["current"] == {"value": "50"}
            assert current[1]["object"]["describedObject"] == {"apiVersion": "v1", "kind": "Service", "name": "web"}
            assert current[2]["external"]["current"]["averageValue"] == "15"  # 30 over 2 replicas
            conds = {c["type"]: c for c in obj["status"]["conditions"]}
            assert conds["ScalingActive"]["reason"] == "ValidMetricFound"
            table = (await asyncio.to_thread(kubectl.run, "get", "hpa", "web")).stdout.splitlines()
            assert table[1].split()[:2] == ["web", "ReplicaSet/web"]
            assert table[1].split("ReplicaSet/web", 1)[1].strip().split("   ")[0] == "10/10, 50/100 + 1 more..."
            described = (await asyncio.to_thread(kubectl.run, "describe", "hpa", "web")).stdout
            lines = {" ".join(line.split()) for line in described.splitlines()}
            assert {'"requests_per_second" on pods: 10 / 10', '"hits" on Service/web (target value): 50 / 100',
                    '"queue_messages" (target average value): 15 / 30', "ReplicaSet pods: 2 current / 2 desired"} <= lines

            # the queue grows to 120 (the other queue is not selected): 120 / 30 per pod = 4
            values.set(external={"queue_messages": [({"queue": "jobs"}, "100"), ({"queue": "jobs"}, "20"), ({"queue": "other"}, "900")]})
            await eventually(lambda: rescaled(f"New size: 4; reason: external metric queue_messages({GO_SELECTOR}) above target"),
                             timeout=60)
            obj = await eventually(lambda: replicas(4, "5", "30"), timeout=60)
            assert obj["status"]["currentMetrics"][2]["external"]["current"] == {"averageValue": "30"}

            # the Service's hits are gone from the adapter: that metric fails (an Event, an empty status), the others still scale
            values.set(objects={})

            async def failed() -> Any:
                events = (await client.list(CORE_EVENTS, "default"))["items"]
                prefix = "unable to get metric hits: Service on default web/unable to fetch metrics from custom metrics API: "
                return next((e for e in events if e["reason"] == "FailedGetObjectMetric" and e["message"].startswith(prefix)), None)

            event = await eventually(failed, timeout=60)
            assert event["type"] == "Warning" and "the server could not find the metric services/web/hits" in event["message"]

            async def emptied() -> Any:
                obj = await client.get(HORIZONTAL_POD_AUTOSCALERS, "default", "web")
                return obj if (obj["status"].get("currentMetrics") or [{}, {}])[1] == {"type": ""} else None

            obj = await eventually(emptied, timeout=60)
            assert {c["type"]: c["reason"] for c in obj["status"]["conditions"]}["ScalingActive"] == "ValidMetricFound"

    # what the controller asked the adapter, through the aggregator
    paths = {p: q for p, q in values.requests}
    assert paths["/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/requests_per_second"] == {"labelSelector": "app=web"}
    assert paths["/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/services/web/hits"] == {}
    assert paths["/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_messages"] in ({"labelSelector": "queue=jobs"}, {})
    assert ("/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_messages", {"labelSelector": "queue=jobs"}) in values.requests
