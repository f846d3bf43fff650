"""What the generic handlers do through a kind's hooks rather than its name:
the subresource registry (``handlers.subresources.SUBRESOURCES``), a
collection served by another resource's subresource (``bindings`` through
``pods/binding``), and the namespaces' delete hooks (``NamespaceLifecycle``).

Run over HTTP against a real API server with the official client.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

NS = "default"


@pytest.fixture
def core(k8s) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(k8s)


def pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def binding(name: str, node: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}, "target": {"kind": "Node", "name": node}}


def raw(k8s, method: str, path: str, body: Any = None) -> tuple[int, dict[str, Any]]:
    try:
        resp = k8s.call_api(
            *k8s.param_serialize(
                method=method,
                resource_path=path,
                header_params={"Content-Type": "application/json", "Accept": "application/json"},
                body=body,
            )
        )
        resp.read()
        return resp.status, json.loads(resp.data)
    except ApiException as err:
        return err.status, json.loads(err.body)


def wait_for(condition, *, timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


# -- bindings: a collection whose POST pods/binding serves ---------------------------


def test_posting_to_the_bindings_collection_binds_the_pod_the_binding_names(core):
    core.create_namespaced_pod(NS, pod("via-collection"))
    response = core.create_namespaced_binding(NS, binding("via-collection", "node-a"), _preload_content=False)
    assert response.status == 201
    assert json.loads(response.data)["status"] == "Success"
    bound = core.read_namespaced_pod("via-collection", NS)
    assert bound.spec.node_name == "node-a"
    assert [c.type for c in bound.status.conditions if c.status == "True"] == ["PodScheduled"]
    # the same rules as pods/NAME/binding: a bound pod is a 409
    with pytest.raises(ApiException) as err:
        core.create_namespaced_binding(NS, binding("via-collection", "node-b"), _preload_content=False)
    assert err.value.status == 409
    assert "already assigned to node" in json.loads(err.value.body)["message"]


def test_a_binding_for_a_missing_pod_is_a_404_and_one_without_a_target_is_invalid(k8s, core):
    status, body = raw(k8s, "POST", f"/api/v1/namespaces/{NS}/bindings", binding("no-such-pod", "node-a"))
    assert status == 404
    assert body["details"]["name"] == "no-such-pod"
    core.create_namespaced_pod(NS, pod("no-target"))
    status, body = raw(k8s, "POST", f"/api/v1/namespaces/{NS}/bindings", {"metadata": {"name": "no-target"}})
    assert status == 422
    assert body["details"]["causes"][0]["field"] == "target.name"


def test_a_binding_carries_its_annotations_checks_its_uid_and_targets_only_nodes(k8s, core):
    core.create_namespaced_pod(NS, pod("annotated"))
    uid = core.read_namespaced_pod("annotated", NS).metadata.uid
    status, body = raw(k8s, "POST", f"/api/v1/namespaces/{NS}/pods/annotated/binding",
                       {**binding("annotated", "node-a"), "target": {"kind": "Pod", "name": "node-a"}})
    assert (status, body["message"]) == (422, 'Binding "annotated" is invalid: target.kind: Unsupported value: "Pod": '
                                               'supported values: "Node", "<empty>"')
    wrong = binding("annotated", "node-a")
    wrong["metadata"]["uid"] = "not-the-pods-uid"
    status, body = raw(k8s, "POST", f"/api/v1/namespaces/{NS}/pods/annotated/binding", wrong)
    assert status == 409 and body["message"].endswith(
        f"Precondition failed: UID in precondition: not-the-pods-uid, UID in object meta: {uid}")
    right = binding("annotated", "node-a")
    right["metadata"].update(uid=uid, annotations={"example.com/placed-by": "test"})
    status, _ = raw(k8s, "POST", f"/api/v1/namespaces/{NS}/pods/annotated/binding", right)
    assert status == 201
    bound = core.read_namespaced_pod("annotated", NS)
    assert bound.spec.node_name == "node-a" and bound.metadata.annotations["example.com/placed-by"] == "test"


def test_the_bindings_collection_serves_only_create(k8s):
    status, _ = raw(k8s, "GET", f"/api/v1/namespaces/{NS}/bindings")
    assert status == 405


# -- the subresource registry ----------------------------------------------------------


def test_a_subresource_answers_only_its_verbs(k8s, core):
    core.create_namespaced_pod(NS, pod("verbs"))
    status, body = raw(k8s, "GET", f"/api/v1/namespaces/{NS}/pods/verbs/binding")
    assert status == 405
    assert body["message"] == "GET is not supported on pods/binding"
    status, body = raw(k8s, "GET", f"/api/v1/namespaces/{NS}/pods/verbs/status")
    assert status == 200 and body["metadata"]["name"] == "verbs"


def test_a_subresource_the_kind_does_not_list_is_a_404(k8s, core):
    core.create_namespaced_pod(NS, pod("no-scale"))
    status, _ = raw(k8s, "GET", f"/api/v1/namespaces/{NS}/pods/no-scale/scale")
    assert status == 404
    status, _ = raw(k8s, "GET", f"/api/v1/namespaces/{NS}/pods/no-scale/finalize")
    assert status == 404


def test_namespace_finalize_replaces_the_finalizers_and_only_by_put(k8s, core):
    name = f"fin-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": name}})
    status, _ = raw(k8s, "GET", f"/api/v1/namespaces/{name}/finalize")
    assert status == 405
    status, body = raw(k8s, "PUT", f"/api/v1/namespaces/{name}/finalize", {"metadata": {"name": name}, "spec": {"finalizers": []}})
    assert status == 200
    assert body["spec"]["finalizers"] == []
    assert core.read_namespace(name).spec.finalizers in (None, [])


# -- the namespaces' delete hooks ------------------------------------------------------


def test_a_deleted_namespace_keeps_its_content_until_finalized_then_goes(core):
    """Content removal is the namespace controller's (tests/controllers/test_namespace.py);
    the API server only marks it Terminating, and deletes it once /finalize
    leaves no finalizer."""
    name = f"gone-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": name}})
    core.create_namespaced_config_map(name, {"metadata": {"name": "a"}, "data": {"k": "v"}})
    core.delete_namespace(name)
    ns = core.read_namespace(name)
    assert ns.status.phase == "Terminating" and ns.spec.finalizers == ["kubernetes"]
    assert [c.metadata.name for c in core.list_namespaced_config_map(name).items] == ["a"]
    core.delete_namespaced_config_map("a", name)
    core.replace_namespace_finalize(name, {"metadata": {"name": name}, "spec": {"finalizers": []}})
    with pytest.raises(ApiException) as err:
        core.read_namespace(name)
    assert err.value.status == 404


def test_the_delete_hook_refuses_system_namespaces_and_skips_dry_runs(core):
    with pytest.raises(ApiException) as err:
        core.delete_namespace("default")
    assert err.value.status == 403
    assert json.loads(err.value.body)["message"] == 'namespaces "default" is forbidden: this namespace may not be deleted'
    name = f"dry-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": name}})
    core.delete_namespace(name, dry_run="All")
    assert core.read_namespace(name).metadata.deletion_timestamp is None
    assert core.read_namespace(name).status.phase == "Active"
