"""Error responses: exact ``Status`` bodies, bad input, and a server that survives it.

Byte-exact bodies matter because kubectl prints ``message`` verbatim and
clients parse ``reason``/``details`` (shared/reference/client-behaviours.md §8).
Malformed bodies are sent through the official client's own connection pool,
since its API methods would serialize them.
"""

from __future__ import annotations

import json
from typing import Any

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

NS = "default"


def pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def deployment(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}},
        },
    }


def send(k8s, method: str, path: str, body: bytes | None = None, content_type: str = "application/json"):
    """A raw request over the official client's connection pool: (status, headers, body)."""
    response = k8s.rest_client.pool_manager.request(
        method,
        k8s.configuration.host + path,
        body=body,
        headers={"Content-Type": content_type, "Accept": "application/json"},
        preload_content=True,
        retries=False,
    )
    return response.status, response.headers, response.data


@pytest.fixture
def core(k8s) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(k8s)


@pytest.fixture
def apps(k8s) -> kubernetes.client.AppsV1Api:
    return kubernetes.client.AppsV1Api(k8s)


def error_of(call, *args: Any, **kwargs: Any) -> ApiException:
    with pytest.raises(ApiException) as err:
        call(*args, **kwargs)
    return err.value


# -- exact bodies ------------------------------------------------------------------


def test_already_exists_is_byte_exact(core):
    core.create_namespaced_pod(NS, pod("x"))
    err = error_of(core.create_namespaced_pod, NS, pod("x"))
    assert err.status == 409
    assert err.headers["Content-Type"] == "application/json"
    assert err.body.encode() == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods \\"x\\" already exists",'
        b'"reason":"AlreadyExists","details":{"name":"x","kind":"pods"},"code":409}\n'
    )


def test_already_exists_for_a_grouped_resource_names_the_group(apps):
    apps.create_namespaced_deployment(NS, deployment("triple-nginx"))
    err = error_of(apps.create_namespaced_deployment, NS, deployment("triple-nginx"))
    assert err.body.encode() == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"deployments.apps '
        b'\\"triple-nginx\\" already exists","reason":"AlreadyExists","details":{"name":"triple-nginx",'
        b'"group":"apps","kind":"deployments"},"code":409}\n'
    )


def test_not_found_is_byte_exact(core, apps):
    err = error_of(core.read_namespaced_pod, "nope", NS)
    assert err.status == 404
    assert err.body.encode() == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods \\"nope\\" not found",'
        b'"reason":"NotFound","details":{"name":"nope","kind":"pods"},"code":404}\n'
    )
    err = error_of(apps.delete_namespaced_deployment, "nope", NS)
    assert json.loads(err.body)["message"] == 'deployments.apps "nope" not found'
    assert json.loads(err.body)["details"] == {"name": "nope", "group": "apps", "kind": "deployments"}


def test_an_invalid_name_is_a_422_with_causes(core):
    err = error_of(core.create_namespaced_config_map, NS, {"metadata": {"name": "Bad_Name"}})
    assert err.status == 422
    body = json.loads(err.body)
    assert list(body) == ["kind", "apiVersion", "metadata", "status", "message", "reason", "details", "code"]
    assert body["reason"] == "Invalid"
    cause_message = (
        'Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric '
        "characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
        "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
    )
    assert body["message"] == f'ConfigMap "Bad_Name" is invalid: metadata.name: {cause_message}'
    assert body["details"] == {
        "name": "Bad_Name",
        "kind": "ConfigMap",
        "causes": [{"reason": "FieldValueInvalid", "message": cause_message, "field": "metadata.name"}],
    }


def test_a_missing_name_is_a_422_naming_the_field(core):
    err = error_of(core.create_namespaced_config_map, NS, {"metadata": {}})
    body = json.loads(err.body)
    assert err.status == 422
    assert body["details"]["causes"][0]["field"] == "metadata.name"
    assert body["details"]["causes"][0]["reason"] == "FieldValueRequired"


# -- bad input ------------------------------------------------------------------------


BAD_INPUTS = [
    pytest.param("POST", "configmaps", b'{"metadata": {"name": "j"', "application/json", 400, "BadRequest", id="malformed-json"),
    pytest.param("POST", "configmaps", b"[1, 2, 3]", "application/json", 400, "BadRequest", id="json-array"),
    pytest.param("POST", "configmaps", b"metadata: {name: y\n  data: [", "application/yaml", 400, "BadRequest", id="malformed-yaml"),
    pytest.param(
        "POST", "configmaps", b'{"kind":"Secret","apiVersion":"v1","metadata":{"name":"k"}}', "application/json", 400, "BadRequest", id="wrong-kind"
    ),
    pytest.param(
        "POST", "configmaps", b'{"kind":"ConfigMap","apiVersion":"apps/v1","metadata":{"name":"v"}}', "application/json", 400, "BadRequest", id="wrong-apiversion"
    ),
    pytest.param("POST", "configmaps", b'{"metadata":{"name":"t"}}', "text/plain", 415, "UnsupportedMediaType", id="unknown-content-type"),
    pytest.param(
        "POST", "configmaps", b'{"metadata":{"name":"p"}}', "application/vnd.kubernetes.protobuf", 400, "BadRequest", id="json-labelled-protobuf"
    ),
    pytest.param("PATCH", "configmaps/existing", b'{"data":{}}', "text/plain", 415, "UnsupportedMediaType", id="unknown-patch-type"),
    pytest.param("POST", "configmaps/existing", b'{"metadata":{"name":"existing"}}', "application/json", 405, "MethodNotAllowed", id="post-on-item"),
    pytest.param("PUT", "configmaps", b'{"metadata":{"name":"c"}}', "application/json", 405, "MethodNotAllowed", id="put-on-collection"),
    pytest.param("PUT", "configmaps/existing", b'{"metadata":{"name":"other"},"data":{"k":"x"}}', "application/json", 400, "BadRequest", id="name-mismatch"),
]


def _state(listed) -> list[tuple[str, str, dict | None]]:
    return [(c.metadata.name, c.metadata.resource_version, c.data) for c in listed.items]


@pytest.mark.parametrize(("method", "path", "body", "content_type", "code", "reason"), BAD_INPUTS)
def test_bad_input_is_a_clear_status_and_stores_nothing(k8s, core, method, path, body, content_type, code, reason):
    core.create_namespaced_config_map(NS, {"metadata": {"name": "existing"}, "data": {"k": "v"}})
    before = core.list_namespaced_config_map(NS)
    status, headers, data = send(k8s, method, f"/api/v1/namespaces/{NS}/{path}", body, content_type)
    assert status == code, data
    assert headers["Content-Type"] == "application/json"
    assert data.endswith(b"}\n")
    err = json.loads(data)
    assert (err["kind"], err["apiVersion"], err["status"], err["reason"], err["code"]) == ("Status", "v1", "Failure", reason, code)
    assert err["message"]
    after = core.list_namespaced_config_map(NS)
    # the namespace's objects are as they were (the store's own revision may move: the server
    # writes in the background too, e.g. the FlowSchemas' Dangling conditions after a start)
    assert _state(after) == _state(before)
    assert [c.data for c in after.items] == [{"k": "v"}]
    assert send(k8s, "GET", "/healthz")[2] == b"ok"


def test_a_body_over_3_mib_is_a_413_and_the_server_keeps_serving(k8s, core):
    big = json.dumps({"metadata": {"name": "big"}, "data": {"blob": "x" * (3 * 1024 * 1024 + 10)}}).encode()
    status, _, data = send(k8s, "POST", f"/api/v1/namespaces/{NS}/configmaps", big)
    assert status == 413
    err = json.loads(data)
    assert (err["reason"], err["code"]) == ("RequestEntityTooLarge", 413)
    assert error_of(core.read_namespaced_config_map, "big", NS).status == 404
    just_under = {"metadata": {"name": "fits"}, "data": {"blob": "x" * (1024 * 1024)}}
    assert core.create_namespaced_config_map(NS, just_under).metadata.name == "fits"


def test_an_unknown_resource_or_group_is_a_404_status(k8s):
    for path in ("/api/v1/namespaces/default/widgets", "/apis/nope.example.com/v1/things", "/api/v2/pods"):
        status, _, data = send(k8s, "GET", path)
        assert status == 404, path
        assert json.loads(data)["reason"] == "NotFound"


def test_a_namespaced_resource_under_a_cluster_url_is_not_created(k8s, core):
    status, _, _ = send(k8s, "POST", "/api/v1/configmaps", b'{"metadata":{"name":"nowhere"}}')
    assert status in (404, 405)
    assert all(c.metadata.name != "nowhere" for c in core.list_config_map_for_all_namespaces().items)


def test_the_server_keeps_serving_after_a_burst_of_bad_requests(k8s, core):
    for i in range(30):
        send(k8s, "POST", f"/api/v1/namespaces/{NS}/configmaps", b"{" * (i + 1))
        send(k8s, "POST", f"/api/v1/namespaces/{NS}/pods", b"\xff\xfe garbage", "application/yaml")
    assert core.create_namespaced_config_map(NS, {"metadata": {"name": "after"}}).metadata.name == "after"
