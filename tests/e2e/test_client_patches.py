"""Every patch type and server-side apply through the official ``kubernetes`` client.

The client (v37) sends a dict body as a strategic merge patch and a list body
as a JSON patch (its rest.py picks the type from the body); merge and apply
patches go through ``ApiClient.call_api`` with an explicit Content-Type, as a
user of the client does. Error cases assert the whole Status and that the
stored object did not change (same resourceVersion).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlencode

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

from tests.e2e.conftest import NS, deployment

MERGE = "application/merge-patch+json"
APPLY = "application/apply-patch+yaml"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"


@pytest.fixture
def apps(k8s) -> kubernetes.client.AppsV1Api:
    return kubernetes.client.AppsV1Api(k8s)


@pytest.fixture
def core(k8s) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(k8s)


def raw_patch(k8s, path: str, body: Any, content_type: str, **query: str) -> tuple[int, dict[str, Any]]:
    """PATCH through the client's ApiClient.call_api; returns (status, decoded body)."""
    url = k8s.configuration.host + path + (f"?{urlencode(query)}" if query else "")
    headers = {"Content-Type": content_type, "Accept": "application/json"}
    # JSON content types: the client json.dumps the body; an apply body given as a string goes out as is
    response = k8s.call_api("PATCH", url, header_params=headers, body=body)
    response.read()
    return response.status, json.loads(response.data)


def plain_patch(k8s, path: str, raw: bytes, content_type: str) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        k8s.configuration.host + path, data=raw, method="PATCH", headers={"Content-Type": content_type}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def deploy_path(name: str) -> str:
    return f"/apis/apps/v1/namespaces/{NS}/deployments/{name}"


def cm_path(name: str) -> str:
    return f"/api/v1/namespaces/{NS}/configmaps/{name}"


def two_containers(apps) -> Any:
    body = deployment("web")
    body["spec"]["template"]["spec"]["containers"] = [
        {"name": "web", "image": "nginx:1.27"},
        {"name": "side", "image": "busybox:1.36", "args": ["sleep", "1d"]},
    ]
    return apps.create_namespaced_deployment(NS, body)


def status_of(error: ApiException) -> dict[str, Any]:
    return json.loads(error.body)


# -- the three patch types ------------------------------------------------------------------


def test_a_dict_body_is_a_strategic_merge_patch(apps):
    two_containers(apps)
    patched = apps.patch_namespaced_deployment(
        "web",
        NS,
        {
            "metadata": {"labels": {"patched": "yes"}},
            "spec": {"template": {"spec": {"containers": [{"name": "side", "image": "busybox:1.37"}]}}},
        },
    )
    containers = patched.spec.template.spec.containers
    assert [(c.name, c.image) for c in containers] == [("web", "nginx:1.27"), ("side", "busybox:1.37")]
    assert containers[1].args == ["sleep", "1d"]
    assert patched.metadata.labels == {"app": "web", "patched": "yes"}
    assert patched.metadata.generation == 2
    reordered = apps.patch_namespaced_deployment(
        "web",
        NS,
        {"spec": {"template": {"spec": {"$setElementOrder/containers": [{"name": "side"}, {"name": "web"}]}}}},
    )
    assert [c.name for c in reordered.spec.template.spec.containers] == ["side", "web"]


def test_a_list_body_is_a_json_patch(apps):
    created = two_containers(apps)
    patched = apps.patch_namespaced_deployment(
        "web",
        NS,
        [
            {"op": "test", "path": "/metadata/uid", "value": created.metadata.uid},
            {"op": "replace", "path": "/spec/replicas", "value": 3},
            {"op": "add", "path": "/spec/template/spec/containers/1/args/0", "value": "exec"},
            {"op": "remove", "path": "/spec/template/spec/containers/0"},
            {"op": "add", "path": "/metadata/annotations", "value": {"example.com/owner": "1"}},
            {"op": "copy", "from": "/metadata/annotations/example.com~1owner", "path": "/metadata/labels/copied"},
        ],
    )
    assert patched.spec.replicas == 3
    assert [c.name for c in patched.spec.template.spec.containers] == ["side"]
    assert patched.spec.template.spec.containers[0].args == ["exec", "sleep", "1d"]
    assert patched.metadata.annotations == {"example.com/owner": "1"}
    assert patched.metadata.labels == {"app": "web", "copied": "1"}


def test_a_merge_patch_replaces_lists_and_deletes_nulls(k8s, apps):
    two_containers(apps)
    status, body = raw_patch(
        k8s,
        deploy_path("web"),
        {"metadata": {"labels": {"app": None, "x": "y"}}, "spec": {"template": {"spec": {"containers": [{"name": "one", "image": "a"}]}}}},
        MERGE,
    )
    assert status == 200
    assert body["metadata"]["labels"] == {"x": "y"}
    assert [c["name"] for c in body["spec"]["template"]["spec"]["containers"]] == ["one"]
    # defaults are applied to what the merge patch brought in
    assert body["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == "Always"


# -- server-side apply -----------------------------------------------------------------------


def apply_cm(k8s, manager: str, data: dict[str, str], *, labels: dict[str, str] | None = None, force: bool = False):
    meta: dict[str, Any] = {"name": "cfg"}
    if labels:
        meta["labels"] = labels
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}
    query = {"fieldManager": manager}
    if force:
        query["force"] = "true"
    return raw_patch(k8s, cm_path("cfg"), json.dumps(body), APPLY, **query)


def owned(obj: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(e["manager"], e["operation"]): e["fieldsV1"] for e in obj["metadata"]["managedFields"]}


def test_server_side_apply_ownership_conflicts_and_force(k8s, core):
    status, created = apply_cm(k8s, "alice", {"a": "1", "b": "2"}, labels={"team": "blue"})
    assert status == 201
    [entry] = created["metadata"]["managedFields"]
    assert {k: v for k, v in entry.items() if k != "time"} == {
        "manager": "alice",
        "operation": "Apply",
        "apiVersion": "v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:data": {"f:a": {}, "f:b": {}}, "f:metadata": {"f:labels": {"f:team": {}}}},
    }
    assert entry["time"].endswith("Z")

    status, conflict = apply_cm(k8s, "bob", {"b": "other"})
    assert status == 409
    assert conflict == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'Apply failed with 1 conflict: conflict with "alice": .data.b',
        "reason": "Conflict",
        "details": {"causes": [{"reason": "FieldManagerConflict", "message": 'conflict with "alice"', "field": ".data.b"}]},
        "code": 409,
    }
    assert core.read_namespaced_config_map("cfg", NS).metadata.resource_version == created["metadata"]["resourceVersion"]

    # the same value is shared ownership, not a conflict
    status, shared = apply_cm(k8s, "bob", {"a": "1"})
    assert status == 200
    assert owned(shared)[("bob", "Apply")] == {"f:data": {"f:a": {}}}
    assert owned(shared)[("alice", "Apply")] == {"f:data": {"f:a": {}, "f:b": {}}, "f:metadata": {"f:labels": {"f:team": {}}}}

    status, forced = apply_cm(k8s, "bob", {"a": "1", "b": "other"}, force=True)
    assert status == 200
    assert forced["data"] == {"a": "1", "b": "other"}
    assert owned(forced)[("bob", "Apply")] == {"f:data": {"f:a": {}, "f:b": {}}}
    assert owned(forced)[("alice", "Apply")] == {"f:data": {"f:a": {}}, "f:metadata": {"f:labels": {"f:team": {}}}}

    # alice stops applying the label (hers alone: removed) and a (bob's too: kept)
    status, dropped = apply_cm(k8s, "alice", {})
    assert status == 200
    assert dropped["data"] == {"a": "1", "b": "other"}
    assert "labels" not in dropped["metadata"]
    # an empty map applied is owned as a leaf
    assert owned(dropped) == {("alice", "Apply"): {"f:data": {}}, ("bob", "Apply"): {"f:data": {"f:a": {}, "f:b": {}}}}


def test_apply_conflicts_with_an_update_manager_and_lists_several_paths(k8s, apps):
    body = deployment("web", replicas=2)
    body["spec"]["template"]["spec"]["containers"][0].pop("ports")
    status, _ = raw_patch(k8s, deploy_path("web"), json.dumps(body), APPLY, fieldManager="alice")
    assert status == 201
    apps.patch_namespaced_deployment("web", NS, {"spec": {"replicas": 5}}, field_manager="carol")
    stored = apps.read_namespaced_deployment("web", NS)
    entries = {(m.manager, m.operation): m for m in stored.metadata.managed_fields}
    assert entries[("carol", "Update")].fields_v1 == {"f:spec": {"f:replicas": {}}}
    assert entries[("carol", "Update")].api_version == "apps/v1"

    with pytest.raises(ApiException) as conflict:
        apps.patch_namespaced_deployment(
            "web", NS, {**body, "spec": {**body["spec"], "replicas": 2}}, field_manager="alice",
            _content_type=APPLY,
        )
    assert conflict.value.status == 409
    assert status_of(conflict.value)["message"] == 'Apply failed with 1 conflict: conflict with "carol" using apps/v1: .spec.replicas'

    body["spec"]["replicas"] = 9
    body["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:2"
    status, several = raw_patch(k8s, deploy_path("web"), json.dumps(body), APPLY, fieldManager="dave")
    assert status == 409
    assert several["message"] == (
        "Apply failed with 2 conflicts: "
        'conflicts with "alice":\n- .spec.template.spec.containers[name="web"].image\n'
        'conflicts with "carol" using apps/v1:\n- .spec.replicas'
    )
    assert [(c["field"], c["message"]) for c in several["details"]["causes"]] == [
        (".spec.template.spec.containers[name=\"web\"].image", 'conflict with "alice"'),
        (".spec.replicas", 'conflict with "carol" using apps/v1'),
    ]
    assert apps.read_namespaced_deployment("web", NS).metadata.resource_version == stored.metadata.resource_version


# -- bad input: a precise Status and nothing stored --------------------------------------------


def assert_unchanged(apps, before) -> None:
    assert apps.read_namespaced_deployment("web", NS).metadata.resource_version == before.metadata.resource_version


def failure(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message}
    if reason:
        out["reason"] = reason
    if details is not None:
        out["details"] = details
    out["code"] = code
    return out


def test_a_patch_body_of_the_wrong_type_for_its_content_type_is_400(k8s, apps):
    before = two_containers(apps)
    status, body = raw_patch(k8s, deploy_path("web"), [{"spec": {}}], STRATEGIC)
    assert (status, body) == (
        400,
        failure(400, "BadRequest", "json: cannot unmarshal array into Go value of type map[string]interface {}"),
    )
    # the client turns any non-list JSON patch body into a strategic merge patch
    # (its rest.py), so this one goes out through plain HTTP
    status, body = plain_patch(k8s, deploy_path("web"), b'{"op": "remove", "path": "/spec"}', JSON_PATCH)
    assert (status, body) == (
        400,
        failure(400, "BadRequest", "json: cannot unmarshal object into Go value of type jsonpatch.Patch"),
    )
    status, body = plain_patch(k8s, deploy_path("web"), b"{not json", MERGE)
    assert (status, body) == (400, failure(400, "BadRequest", "Invalid JSON Patch"))
    # a JSON string is valid JSON but no merge patch
    status, body = raw_patch(k8s, deploy_path("web"), "just a string", MERGE)
    assert (status, body) == (400, failure(400, "BadRequest", "Invalid JSON Patch"))
    assert_unchanged(apps, before)


def test_a_json_patch_to_a_missing_path_is_422(apps):
    before = two_containers(apps)
    with pytest.raises(ApiException) as error:
        apps.patch_namespaced_deployment("web", NS, [{"op": "replace", "path": "/spec/nothing/here", "value": 1}])
    assert error.value.status == 422
    status = status_of(error.value)
    assert (status["reason"], status["message"]) == ("Invalid", "the server rejected our request due to an error in our request")
    with pytest.raises(ApiException) as failed_test:
        apps.patch_namespaced_deployment("web", NS, [{"op": "test", "path": "/spec/replicas", "value": 7}])
    assert failed_test.value.status == 422
    assert_unchanged(apps, before)


def test_an_apply_naming_a_different_kind_or_object_than_the_url_is_400(k8s, apps):
    before = two_containers(apps)
    wrong_kind = deployment("web")
    wrong_kind["kind"] = "ReplicaSet"
    status, body = raw_patch(k8s, deploy_path("web"), json.dumps(wrong_kind), APPLY, fieldManager="m")
    assert (status, body) == (400, failure(400, "BadRequest", "invalid object type: apps/v1, Kind=ReplicaSet"))
    wrong_version = deployment("web")
    wrong_version["apiVersion"] = "apps/v1beta1"
    status, body = raw_patch(k8s, deploy_path("web"), json.dumps(wrong_version), APPLY, fieldManager="m")
    assert (status, body) == (400, failure(400, "BadRequest", "invalid object type: apps/v1beta1, Kind=Deployment"))
    status, body = raw_patch(k8s, deploy_path("web"), json.dumps(deployment("other")), APPLY, fieldManager="m")
    assert (status, body) == (
        400,
        failure(400, "BadRequest", "the name of the object (other) does not match the name on the URL (web)"),
    )
    status, body = raw_patch(k8s, deploy_path("web"), json.dumps(deployment("web")), APPLY)
    assert (status, body) == (400, failure(400, "BadRequest", "PATCH /apply requires fieldManager"))
    assert_unchanged(apps, before)


def test_strategic_directives_where_the_field_has_no_merge_key(k8s, apps):
    before = two_containers(apps)
    # an item of a list merged on "name" that lacks its name: upstream's ErrNoMergeKey, a plain 500
    status, body = raw_patch(
        k8s, deploy_path("web"), {"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}}, STRATEGIC
    )
    assert status == 500
    assert body["message"] == "Internal error occurred: map: map[image:x] does not contain declared merge key: name"
    assert_unchanged(apps, before)
    # a $patch directive inside a list that is replaced, not merged (tolerations
    # have no merge key): the list is replaced and the unknown "$patch" dropped
    status, body = raw_patch(
        k8s,
        deploy_path("web"),
        {"spec": {"template": {"spec": {"tolerations": [{"key": "a", "$patch": "delete"}]}}}},
        STRATEGIC,
    )
    assert status == 200
    assert body["spec"]["template"]["spec"]["tolerations"] == [{"key": "a"}]


def test_an_unknown_patch_content_type_is_415(k8s, apps):
    before = two_containers(apps)
    status, body = raw_patch(k8s, deploy_path("web"), {"spec": {}}, "application/json")
    assert (status, body) == (
        415,
        failure(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: "
            "application/json-patch+json, application/merge-patch+json, "
            "application/strategic-merge-patch+json, application/apply-patch+yaml",
        ),
    )
    assert_unchanged(apps, before)
