"""The endpoint fields both endpoint controllers take from a pod (pure: no server needed)."""

from k8py.controllers.service_pods import pod_endpoint_fields


def _pod(**spec: str) -> dict:
    return {"metadata": {"namespace": "ns", "name": "web-0", "uid": "u1"}, "spec": dict(spec), "status": {"podIP": "10.0.0.5"}}


def test_a_scheduled_pod_in_the_services_subdomain_gets_hostname_node_and_target_ref() -> None:
    fields = pod_endpoint_fields(_pod(hostname="web-0", subdomain="web", nodeName="n1"), "web")
    assert fields == {
        "hostname": "web-0",
        "nodeName": "n1",
        "targetRef": {"kind": "Pod", "namespace": "ns", "name": "web-0", "uid": "u1"},
    }
    assert list(fields) == ["hostname", "nodeName", "targetRef"]


def test_a_pod_of_another_subdomain_has_no_hostname_and_an_unscheduled_one_no_node() -> None:
    fields = pod_endpoint_fields(_pod(hostname="web-0", subdomain="other"), "web")
    assert fields == {"targetRef": {"kind": "Pod", "namespace": "ns", "name": "web-0", "uid": "u1"}}
