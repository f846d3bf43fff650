"""HorizontalPodAutoscaler ``spec.metrics`` validation over HTTP: a 422
Invalid Status whose causes carry upstream's field paths and messages
(pkg/apis/autoscaling/validation), for autoscaling/v2 and the v1 view."""

from __future__ import annotations

from typing import Any, AsyncIterator, Iterator

import pytest

from k8py.api.errors import Invalid
from k8py.apiserver.validation.autoscaling import go_quantity
from k8py.client.config import ClientConfig
from k8py.client.resource import Resource
from k8py.client.resources import HORIZONTAL_POD_AUTOSCALERS
from k8py.client.rest import RestClient
from tests.support.servers import ServerThread, sqlite_storage

HPA_V1 = Resource("autoscaling", "v1", "horizontalpodautoscalers", True, "HorizontalPodAutoscaler")
REF = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[ServerThread]:
    with ServerThread(sqlite_storage(str(tmp_path_factory.mktemp("hpa") / "data"))) as s:
        yield s


@pytest.fixture
async def client(server) -> AsyncIterator[RestClient]:
    async with RestClient(ClientConfig(server=server.url)) as c:
        yield c


def _hpa(name: str, metrics: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": name, "namespace": "default"},
            "spec": {"scaleTargetRef": REF, "maxReplicas": 4, "metrics": metrics, **spec}}


async def _causes(client: RestClient, body: dict[str, Any], resource: Resource = HORIZONTAL_POD_AUTOSCALERS) -> list[tuple[str, str, str]]:
    with pytest.raises(Invalid) as caught:
        await client.create(resource, body)
    assert caught.value.code == 422
    return [(c.reason, c.field, c.message) for c in caught.value.causes]


async def test_the_metric_type_must_match_the_one_source_that_is_set(client):
    """A missing source is Required; a second one beside the expected one is Forbidden."""
    causes = await _causes(client, _hpa("mismatch", [
        {"type": "Pods", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}},
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}},
         "pods": {"metric": {"name": "rps"}, "target": {"type": "AverageValue", "averageValue": "1"}}},
    ]))
    assert causes == [
        ("FieldValueRequired", "spec.metrics[0].pods", "Required value: must populate information for the given metric source"),
        ("FieldValueForbidden", "spec.metrics[1].pods", "Forbidden: must populate the given metric source only"),
    ]


async def test_an_unknown_metric_type_is_not_supported_and_the_message_says_it_once(client):
    with pytest.raises(Invalid) as caught:
        await client.create(HORIZONTAL_POD_AUTOSCALERS, _hpa("unknown", [{"type": "Memory"}]))
    supported = 'supported values: "ContainerResource", "External", "Object", "Pods", "Resource"'
    not_supported = ("FieldValueNotSupported", "spec.metrics[0].type", f'Unsupported value: "Memory": {supported}')
    # upstream reports it twice in the causes (the type check and the switch's default) ...
    assert [(c.reason, c.field, c.message) for c in caught.value.causes] == [not_supported, not_supported]
    # ... and once in the message (ErrorList.ToAggregate drops repeats)
    assert caught.value.message == (f'HorizontalPodAutoscaler.autoscaling "unknown" is invalid: '
                                    f'spec.metrics[0].type: Unsupported value: "Memory": {supported}')


async def test_target_types_and_values_follow_upstream_rules(client):
    causes = await _causes(client, _hpa("targets", [
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Percent", "averageUtilization": 0}}},
        {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue"}}},
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50, "averageValue": "1"}}},
        {"type": "Pods", "pods": {"metric": {"name": "a/b"}, "target": {"type": "Value", "value": "10"}}},
        {"type": "Object", "object": {"describedObject": {"kind": "Service"}, "metric": {"name": "hits"},
                                      "target": {"type": "Utilization", "averageUtilization": 20}}},
        {"type": "External", "external": {"metric": {"name": "q"}, "target": {"type": "Value", "value": "0", "averageValue": "2"}}},
    ]))
    assert causes == [
        ("FieldValueInvalid", "spec.metrics[0].resource.target.type", 'Invalid value: "Percent": must be either Utilization, Value, or AverageValue'),
        ("FieldValueInvalid", "spec.metrics[0].resource.target.averageUtilization", "Invalid value: 0: must be greater than 0"),
        ("FieldValueRequired", "spec.metrics[1].resource.target.averageUtilization",
         "Required value: must set either a target raw value or a target utilization"),
        ("FieldValueForbidden", "spec.metrics[2].resource.target.averageValue",
         "Forbidden: may not set both a target raw value and a target utilization"),
        ("FieldValueInvalid", "spec.metrics[3].pods.metric.name", "Invalid value: \"a/b\": may not contain '/'"),
        ("FieldValueRequired", "spec.metrics[3].pods.target.averageValue", "Required value: must specify a positive target averageValue"),
        ("FieldValueRequired", "spec.metrics[4].object.describedObject.name", "Required value"),
        ("FieldValueRequired", "spec.metrics[4].object.target.averageValue", "Required value: must set either a target value or averageValue"),
        ("FieldValueInvalid", "spec.metrics[5].external.target.value",
         'Invalid value: resource.Quantity{i:resource.int64Amount{value:0, scale:0}, d:resource.infDecAmount{Dec:(*inf.Dec)(nil)}, '
         's:"0", Format:"DecimalSI"}: must be positive'),
        ("FieldValueForbidden", "spec.metrics[5].external.target.value",
         "Forbidden: may not set both a target value for metric and a per-pod target"),
    ]


async def test_container_resource_metrics_name_a_container_and_a_container_resource(client):
    causes = await _causes(client, _hpa("container", [
        {"type": "ContainerResource", "containerResource": {"name": "gpu", "container": "Web_1",
                                                            "target": {"type": "Utilization", "averageUtilization": 60}}},
    ]))
    assert [c[1] for c in causes] == ["spec.metrics[0].containerResource.name", "spec.metrics[0].containerResource.container"]
    assert causes[0][2] == 'Invalid value: "gpu": must be a standard resource for containers'
    assert causes[1][2].startswith('Invalid value: "Web_1": a lowercase RFC 1123 label must consist of')


async def test_replica_bounds_use_upstream_wording(client):
    causes = await _causes(client, _hpa("bounds", [], minReplicas=3, maxReplicas=0))
    assert causes == [("FieldValueInvalid", "spec.maxReplicas", "Invalid value: 0: must be greater than 0"),
                      ("FieldValueInvalid", "spec.maxReplicas", "Invalid value: 0: must be greater than or equal to `minReplicas`")]


async def test_a_v1_target_of_zero_percent_is_checked_as_its_v2_metric(client):
    body = {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "v1", "namespace": "default"},
            "spec": {"scaleTargetRef": REF, "maxReplicas": 3, "targetCPUUtilizationPercentage": 0}}
    assert await _causes(client, body, HPA_V1) == [
        ("FieldValueInvalid", "spec.metrics[0].resource.target.averageUtilization", "Invalid value: 0: must be greater than 0")]


async def test_valid_metrics_of_every_source_are_stored(client):
    metrics = [
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}},
        {"type": "ContainerResource", "containerResource": {"name": "memory", "container": "app",
                                                            "target": {"type": "AverageValue", "averageValue": "512Mi"}}},
        {"type": "Pods", "pods": {"metric": {"name": "rps"}, "target": {"type": "AverageValue", "averageValue": "500m"}}},
        {"type": "Object", "object": {"describedObject": {"apiVersion": "v1", "kind": "Service", "name": "s"},
                                      "metric": {"name": "hits"}, "target": {"type": "Value", "value": "2k"}}},
        {"type": "External", "external": {"metric": {"name": "queue"}, "target": {"type": "AverageValue", "averageValue": "30"}}},
    ]
    created = await client.create(HORIZONTAL_POD_AUTOSCALERS, _hpa("good", metrics))
    assert created["spec"]["metrics"] == metrics


def test_quantities_print_as_apimachinery_prints_the_struct():
    assert go_quantity("-1") == ('resource.Quantity{i:resource.int64Amount{value:-1, scale:0}, '
                                 'd:resource.infDecAmount{Dec:(*inf.Dec)(nil)}, s:"-1", Format:"DecimalSI"}')
    assert go_quantity("-500m").startswith("resource.Quantity{i:resource.int64Amount{value:-500, scale:-3}")
    assert go_quantity("0Gi").endswith('s:"", Format:"BinarySI"}')
