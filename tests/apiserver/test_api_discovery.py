"""Discovery, version, health and metrics endpoints through the official client."""

from __future__ import annotations

import json
import re

import kubernetes
import pytest

from tests.support.prometheus_text import samples

AGGREGATED_V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
AGGREGATED_V2BETA1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
KUBECTL_ACCEPT = f"{AGGREGATED_V2},{AGGREGATED_V2BETA1},application/json"


def get(k8s, path: str, accept: str = "application/json"):
    response = k8s.rest_client.pool_manager.request(
        "GET", k8s.configuration.host + path, headers={"Accept": accept}, preload_content=True, retries=False
    )
    return response.status, response.headers, response.data


def test_version_reports_kubernetes_1_32(k8s):
    info = kubernetes.client.VersionApi(k8s).get_code()
    assert (info.major, info.minor) == ("1", "32")
    assert re.match(r"v1\.32\.\d+", info.git_version)
    assert info.platform.startswith("linux/")


def test_legacy_discovery_lists_core_and_groups(k8s):
    assert kubernetes.client.CoreApi(k8s).get_api_versions().versions == ["v1"]
    groups = {g.name: g for g in kubernetes.client.ApisApi(k8s).get_api_versions().groups}
    assert {"apps", "batch", "coordination.k8s.io", "discovery.k8s.io", "events.k8s.io"} <= set(groups)
    assert groups["apps"].preferred_version.group_version == "apps/v1"


def test_group_version_resource_lists_carry_verbs_short_names_and_categories(k8s):
    core = {r.name: r for r in kubernetes.client.CoreV1Api(k8s).get_api_resources().resources}
    assert core["pods"].kind == "Pod" and core["pods"].namespaced
    assert set(core["pods"].verbs) == {"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
    assert core["pods"].short_names == ["po"] and core["pods"].categories == ["all"]
    assert set(core["pods/status"].verbs) == {"get", "patch", "update"}
    assert core["pods/binding"].verbs == ["create"]
    assert not core["namespaces"].namespaced and core["namespaces"].short_names == ["ns"]
    assert core["services"].short_names == ["svc"]
    apps = {r.name: r for r in kubernetes.client.AppsV1Api(k8s).get_api_resources().resources}
    assert apps["deployments"].short_names == ["deploy"] and apps["deployments"].categories == ["all"]
    assert set(apps["deployments/scale"].verbs) == {"get", "patch", "update"}
    assert apps["deployments/scale"].group == "autoscaling" and apps["deployments/scale"].kind == "Scale"
    batch = {r.name for r in kubernetes.client.BatchV1Api(k8s).get_api_resources().resources}
    assert {"jobs", "jobs/status", "cronjobs", "cronjobs/status"} <= batch


@pytest.mark.parametrize("media", [AGGREGATED_V2, AGGREGATED_V2BETA1], ids=["v2", "v2beta1"])
def test_aggregated_discovery_echoes_the_negotiated_media_type(k8s, media):
    accept = f"{media},application/json"
    for path in ("/api", "/apis"):
        status, headers, body = get(k8s, path, accept)
        assert status == 200
        assert headers["Content-Type"] == media
        doc = json.loads(body)
        assert doc["kind"] == "APIGroupDiscoveryList"
        assert doc["apiVersion"] == f"apidiscovery.k8s.io/{media.split(';v=')[1].split(';')[0]}"
    _, _, body = get(k8s, "/api", accept)
    [core] = json.loads(body)["items"]
    pods = next(r for r in core["versions"][0]["resources"] if r["resource"] == "pods")
    assert pods["scope"] == "Namespaced" and pods["shortNames"] == ["po"] and pods["categories"] == ["all"]
    assert pods["responseKind"] == {"group": "", "version": "v1", "kind": "Pod"}


def test_kubectl_accept_header_gets_v2_and_plain_accept_gets_legacy(k8s):
    assert get(k8s, "/apis", KUBECTL_ACCEPT)[1]["Content-Type"] == AGGREGATED_V2
    status, headers, body = get(k8s, "/apis")
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert json.loads(body)["kind"] == "APIGroupList"


def test_health_endpoints_answer_ok(k8s):
    for path in ("/healthz", "/livez", "/readyz"):
        status, _, body = get(k8s, path, "*/*")
        assert (status, body) == (200, b"ok"), path


def test_metrics_count_requests_time_them_and_report_watchers_and_revision(k8s, apiserver):
    core = kubernetes.client.CoreV1Api(k8s)
    created = core.create_namespaced_config_map("default", {"metadata": {"name": "m"}})
    for _ in range(3):
        core.list_namespaced_config_map("default")
    watch = core.list_namespaced_config_map("default", watch=True, resource_version=created.metadata.resource_version, timeout_seconds=10, _preload_content=False)
    try:
        _, headers, body = get(k8s, "/metrics", "text/plain")
    finally:
        watch.shutdown()
        watch.release_conn()
    text = body.decode()
    assert headers["Content-Type"].startswith("text/plain")
    # kube-apiserver's labels: verb, dry_run, group, version, resource, subresource, scope, component (and code)
    namespace_scope = {"dry_run": "", "group": "", "version": "v1", "resource": "configmaps", "subresource": "",
                       "scope": "namespace", "component": "apiserver"}
    assert samples(text, "apiserver_request_total", verb="LIST", code="200") == [({**namespace_scope, "verb": "LIST", "code": "200"}, 3.0)]
    assert samples(text, "apiserver_request_total", verb="POST", resource="configmaps") == [
        ({**namespace_scope, "verb": "POST", "code": "201"}, 1.0)]
    assert samples(text, "apiserver_request_duration_seconds_bucket", verb="LIST", resource="configmaps", le="+Inf") == [
        ({**namespace_scope, "verb": "LIST", "le": "+Inf"}, 3.0)]
    assert samples(text, "apiserver_request_duration_seconds_count", verb="LIST", resource="configmaps")[0][1] == 3.0
    assert re.search(r'apiserver_registered_watchers\{resource="configmaps"\} 1\.0', text)
    revision = float(re.search(r"^k8py_storage_revision (\S+)$", text, re.M).group(1))
    assert revision >= int(created.metadata.resource_version)


def test_metric_verbs_are_kube_apiservers_http_method_labels(k8s):
    core = kubernetes.client.CoreV1Api(k8s)
    core.create_namespaced_config_map("default", {"metadata": {"name": "v"}})
    core.read_namespaced_config_map("v", "default")
    core.replace_namespaced_config_map("v", "default", {"metadata": {"name": "v"}, "data": {"a": "1"}})
    core.patch_namespaced_config_map("v", "default", {"data": {"a": "2"}})
    k8s.rest_client.pool_manager.request(
        "PATCH",
        k8s.configuration.host + "/api/v1/namespaces/default/configmaps/v?fieldManager=test",
        body=b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"v"},"data":{"b":"3"}}',
        headers={"Content-Type": "application/apply-patch+yaml"},
        retries=False,
    )
    core.delete_collection_namespaced_config_map("default")
    text = get(k8s, "/metrics", "text/plain")[2].decode()
    by_verb = {labels["verb"]: labels for labels, _ in samples(text, "apiserver_request_total", resource="configmaps")}
    assert set(by_verb) == {"POST", "GET", "PUT", "PATCH", "APPLY", "DELETE"}
    assert (by_verb["GET"]["scope"], by_verb["POST"]["scope"], by_verb["DELETE"]["scope"]) == ("resource", "namespace", "namespace")
