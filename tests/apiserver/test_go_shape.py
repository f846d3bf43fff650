"""Objects come back in the shape upstream's typed round trip gives them.

Go's encoder always writes non-pointer struct fields (even empty), fields
without ``omitempty`` and a zero ``metav1.Time`` as ``null``; the table of
those fields is generated from upstream's Go types (scripts/gen_go_shapes.py).
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import kubernetes

from k8py.api.go_shape import fill_go_fields, shaped_kinds


def _post(url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(f"{url}{path}", data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as resp:
        assert resp.status == 201
        return json.loads(resp.read())


def _get(url: str, path: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{url}{path}") as resp:
        return json.loads(resp.read())


def test_a_created_service_has_an_empty_load_balancer_status(apiserver, k8s):
    svc = {"metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}}
    created = _post(apiserver.url, "/api/v1/namespaces/default/services", svc)
    assert created["status"] == {"loadBalancer": {}}
    assert _get(apiserver.url, "/api/v1/namespaces/default/services/web")["status"] == {"loadBalancer": {}}
    read = kubernetes.client.CoreV1Api(k8s).read_namespaced_service("web", "default")
    assert read.status.load_balancer is not None  # what clients rely on


def test_a_created_deployment_has_a_status_and_a_template_timestamp(apiserver):
    dep = {
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}},
        },
    }
    created = _post(apiserver.url, "/apis/apps/v1/namespaces/default/deployments", dep)
    assert created["status"] == {}
    template = created["spec"]["template"]
    assert template["metadata"]["creationTimestamp"] is None
    assert template["spec"]["containers"][0]["resources"] == {}
    listed = _get(apiserver.url, "/apis/apps/v1/namespaces/default/deployments")["items"][0]
    assert listed["status"] == {} and listed["spec"]["template"]["spec"]["containers"][0]["resources"] == {}


def test_fields_without_omitempty_get_their_zero_value():
    rs = {"metadata": {"name": "x"}, "spec": {"selector": {}, "template": {}}, "status": {}}
    fill_go_fields("apps/v1", "ReplicaSet", rs)
    assert rs["status"]["replicas"] == 0  # ReplicaSetStatus.Replicas has no omitempty


def test_filling_never_changes_a_present_value_and_is_idempotent():
    svc = {"metadata": {"name": "x", "creationTimestamp": "2024-01-01T00:00:00Z"}, "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}}
    fill_go_fields("v1", "Service", svc)
    once = json.dumps(svc, sort_keys=True)
    fill_go_fields("v1", "Service", svc)
    assert json.dumps(svc, sort_keys=True) == once
    assert svc["status"]["loadBalancer"]["ingress"] == [{"ip": "1.2.3.4"}]
    assert svc["metadata"]["creationTimestamp"] == "2024-01-01T00:00:00Z"


def test_every_built_in_kind_served_is_in_the_table(apiserver):
    served = set()
    for group in _get(apiserver.url, "/apis")["groups"]:
        version = group["preferredVersion"]["groupVersion"]
        if group["name"] == "metrics.k8s.io":
            continue  # not a k8s.io/api type (served from the kubelets' figures)
        if group["name"] == "apiregistration.k8s.io":
            continue  # kube-aggregator's APIService is not a k8s.io/api type either
        if group["name"] == "apiextensions.k8s.io":
            # apiextensions-apiserver's types are not in k8s.io/api, which the
            # table is generated from; the CRD strategy writes the status
            # fields clients read (acceptedNames, conditions, storedVersions)
            continue
        for r in _get(apiserver.url, f"/apis/{version}")["resources"]:
            if "/" not in r["name"] and "create" in r["verbs"]:
                served.add(f"{version}/{r['kind']}")
    for r in _get(apiserver.url, "/api/v1")["resources"]:
        if "/" not in r["name"] and "create" in r["verbs"]:
            served.add(f"v1/{r['kind']}")
    kinds = shaped_kinds()
    missing = sorted(k for k in served if k not in kinds)
    assert not missing, missing
