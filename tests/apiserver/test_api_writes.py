"""Write semantics through the official client: object meta, concurrency,
subresources, namespaces, deletion, dry runs."""

from __future__ import annotations

import json
import re
import uuid
from datetime import datetime, timezone
from typing import Any

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

NS = "default"


def cm(name: str = "", data: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = dict(meta)
    if name:
        metadata["name"] = name
    return {"metadata": metadata, "data": data or {"k": "v"}}


def pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def deployment(name: str, replicas: int = 1) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            },
        },
    }


def body_of(err: ApiException) -> dict[str, Any]:
    return json.loads(err.body)


@pytest.fixture
def core(k8s) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(k8s)


@pytest.fixture
def apps(k8s) -> kubernetes.client.AppsV1Api:
    return kubernetes.client.AppsV1Api(k8s)


def raw(k8s, method: str, path: str, body: Any = None, content_type: str = "application/json", query: list | None = None):
    """A request through the official client's transport, returning (status, bytes)."""
    try:
        resp = k8s.call_api(
            *k8s.param_serialize(
                method=method,
                resource_path=path,
                query_params=query or [],
                header_params={"Content-Type": content_type, "Accept": "application/json"},
                body=body,
            ),
        )
        resp.read()
        return resp.status, resp.data
    except ApiException as err:
        return err.status, err.body.encode() if isinstance(err.body, str) else err.body


# -- object meta ----------------------------------------------------------------


def test_create_fills_uid_creation_timestamp_and_resource_version(core):
    created = core.create_namespaced_config_map(NS, cm("meta"))
    assert uuid.UUID(created.metadata.uid).version == 4
    assert created.metadata.creation_timestamp.tzinfo is not None
    assert abs((datetime.now(timezone.utc) - created.metadata.creation_timestamp).total_seconds()) < 60
    assert created.metadata.resource_version.isdigit()
    again = core.read_namespaced_config_map("meta", NS)
    assert (again.metadata.uid, again.metadata.resource_version) == (created.metadata.uid, created.metadata.resource_version)


def test_generate_name_gets_a_random_suffix(core):
    made = {core.create_namespaced_config_map(NS, cm(generate_name="job-")).metadata.name for _ in range(5)}
    assert len(made) == 5
    assert all(re.fullmatch(r"job-[a-z0-9]{5}", n) for n in made)


def test_a_client_set_resource_version_on_create_is_refused(core):
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(NS, cm("rv", resource_version="12"))
    assert err.value.status == 400


def test_generation_bumps_on_spec_changes_only(apps):
    d = apps.create_namespaced_deployment(NS, deployment("gen"))
    assert d.metadata.generation == 1
    d = apps.patch_namespaced_deployment("gen", NS, {"spec": {"replicas": 3}})
    assert d.metadata.generation == 2
    d = apps.patch_namespaced_deployment("gen", NS, {"metadata": {"labels": {"x": "y"}, "annotations": {"a": "b"}}})
    assert d.metadata.generation == 2
    d = apps.patch_namespaced_deployment_status("gen", NS, {"status": {"replicas": 3, "observedGeneration": 2}})
    assert d.metadata.generation == 2
    d = apps.patch_namespaced_deployment(
        "gen", NS, {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}}}
    )
    assert d.metadata.generation == 3


# -- optimistic concurrency -------------------------------------------------------


def test_a_stale_resource_version_on_update_is_a_409_conflict(k8s, core):
    stale = core.create_namespaced_config_map(NS, cm("occ"))
    fresh = core.read_namespaced_config_map("occ", NS)
    fresh.data = {"k": "first"}
    core.replace_namespaced_config_map("occ", NS, fresh)
    stale.data = {"k": "second"}
    with pytest.raises(ApiException) as err:
        core.replace_namespaced_config_map("occ", NS, stale)
    assert err.value.status == 409
    assert err.value.body.encode() == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Operation cannot be '
        b'fulfilled on configmaps \\"occ\\": the object has been modified; please apply your changes to the '
        b'latest version and try again","reason":"Conflict","details":{"name":"occ","kind":"configmaps"},"code":409}\n'
    )
    assert core.read_namespaced_config_map("occ", NS).data == {"k": "first"}


def test_concurrent_patches_without_a_resource_version_all_apply(k8s, core):
    core.create_namespaced_config_map(NS, cm("racy", {}))
    from concurrent.futures import ThreadPoolExecutor

    def patch(i: int) -> None:
        kubernetes.client.CoreV1Api(k8s).patch_namespaced_config_map("racy", NS, {"data": {f"k{i}": str(i)}})

    # a lost race re-applies the patch, never a 409; 16 patches in all, so no patch
    # can lose more often than the server's retry budget (16) even under load
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(patch, range(16)))
    assert core.read_namespaced_config_map("racy", NS).data == {"k": "v", **{f"k{i}": str(i) for i in range(16)}}
    stale = {"metadata": {"resourceVersion": "1"}, "data": {"late": "x"}}
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_config_map("racy", NS, stale)  # a patch that names a version is pinned to it
    assert err.value.status == 409


def test_a_conflict_on_a_grouped_resource_names_the_group(apps):
    stale = apps.create_namespaced_deployment(NS, deployment("occ"))
    apps.patch_namespaced_deployment("occ", NS, {"spec": {"replicas": 2}})
    stale.spec.replicas = 5
    with pytest.raises(ApiException) as err:
        apps.replace_namespaced_deployment("occ", NS, stale)
    body = body_of(err.value)
    assert err.value.status == 409
    assert body["message"].startswith('Operation cannot be fulfilled on deployments.apps "occ": ')
    assert body["details"] == {"name": "occ", "group": "apps", "kind": "deployments"}


def test_an_update_without_resource_version_is_unconditional(core):
    core.create_namespaced_config_map(NS, cm("uncond"))
    core.patch_namespaced_config_map("uncond", NS, {"data": {"k": "x"}})
    replaced = core.replace_namespaced_config_map("uncond", NS, cm("uncond", {"k": "y"}))
    assert replaced.data == {"k": "y"}


# -- status subresource -------------------------------------------------------------


def test_the_main_resource_ignores_status_and_status_ignores_the_rest(apps):
    apps.create_namespaced_deployment(NS, deployment("sep"))
    d = apps.read_namespaced_deployment("sep", NS)
    d.spec.replicas = 4
    d.status = kubernetes.client.V1DeploymentStatus(replicas=99, ready_replicas=99)
    after_main = apps.replace_namespaced_deployment("sep", NS, d)
    assert after_main.spec.replicas == 4
    assert after_main.status is None or after_main.status.replicas is None
    s = apps.read_namespaced_deployment_status("sep", NS)
    s.spec.replicas = 10
    s.metadata.labels = {"sneaky": "yes"}
    s.status = kubernetes.client.V1DeploymentStatus(replicas=4, ready_replicas=2)
    after_status = apps.replace_namespaced_deployment_status("sep", NS, s)
    assert after_status.status.replicas == 4 and after_status.status.ready_replicas == 2
    assert after_status.spec.replicas == 4
    assert not (after_status.metadata.labels or {}).get("sneaky")
    stored = apps.read_namespaced_deployment("sep", NS)
    assert (stored.spec.replicas, stored.status.replicas) == (4, 4)


def test_pod_status_writes_go_through_the_status_subresource(core):
    created = core.create_namespaced_pod(NS, pod("ps"))
    assert created.status.phase == "Pending"
    core.patch_namespaced_pod("ps", NS, {"status": {"phase": "Running"}})
    assert core.read_namespaced_pod("ps", NS).status.phase == "Pending"
    core.patch_namespaced_pod_status("ps", NS, {"status": {"phase": "Running"}})
    assert core.read_namespaced_pod("ps", NS).status.phase == "Running"


# -- namespaces and bootstrap --------------------------------------------------------


def test_bootstrap_namespaces_and_the_kubernetes_service_exist(core):
    names = {ns.metadata.name for ns in core.list_namespace().items}
    assert {"default", "kube-system", "kube-public", "kube-node-lease"} <= names
    svc = core.read_namespaced_service("kubernetes", NS)
    assert svc.spec.cluster_ip == "127.192.0.1"
    assert [(p.name, p.port, p.target_port) for p in svc.spec.ports] == [("https", 443, 6443)]
    assert svc.metadata.labels == {"component": "apiserver", "provider": "kubernetes"}


def test_creating_in_a_missing_namespace_is_a_404(core):
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map("nope", cm("x"))
    assert err.value.status == 404
    body = body_of(err.value)
    assert body["message"] == 'namespaces "nope" not found'
    assert body["details"] == {"name": "nope", "kind": "namespaces"}


def test_a_terminating_namespace_refuses_new_objects_with_a_403(core):
    core.create_namespace({"metadata": {"name": "dying", "finalizers": ["example.com/hold"]}})
    core.create_namespaced_config_map("dying", cm("before"))
    core.delete_namespace("dying")
    assert core.read_namespace("dying").metadata.deletion_timestamp is not None
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map("dying", cm("after"))
    assert err.value.status == 403
    body = body_of(err.value)
    assert body["reason"] == "Forbidden"
    assert body["message"] == (
        'configmaps "after" is forbidden: unable to create new content in namespace dying because it is being terminated'
    )


def test_system_namespaces_cannot_be_deleted(core):
    with pytest.raises(ApiException) as err:
        core.delete_namespace("kube-system")
    assert err.value.status == 403
    assert core.read_namespace("kube-system").metadata.deletion_timestamp is None


# -- deletion --------------------------------------------------------------------------


def test_an_object_with_finalizers_stays_until_they_are_removed(core):
    core.create_namespaced_config_map(NS, cm("fin", finalizers=["example.com/keep"]))
    core.delete_namespaced_config_map("fin", NS)
    held = core.read_namespaced_config_map("fin", NS)
    assert held.metadata.deletion_timestamp is not None
    assert held.metadata.finalizers == ["example.com/keep"]
    core.patch_namespaced_config_map("fin", NS, {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as err:
        core.read_namespaced_config_map("fin", NS)
    assert err.value.status == 404


def test_a_bound_pod_is_deleted_gracefully_and_an_unbound_one_at_once(core):
    core.create_namespaced_pod(NS, pod("bound"))
    core.create_namespaced_pod_binding(
        "bound", NS, {"metadata": {"name": "bound"}, "target": {"kind": "Node", "name": "n1"}}, _preload_content=False
    )
    bound = core.read_namespaced_pod("bound", NS)
    assert bound.spec.node_name == "n1"
    assert any(c.type == "PodScheduled" and c.status == "True" for c in bound.status.conditions)
    core.delete_namespaced_pod("bound", NS)
    terminating = core.read_namespaced_pod("bound", NS)
    assert terminating.metadata.deletion_timestamp is not None
    assert terminating.metadata.deletion_grace_period_seconds == 30
    core.delete_namespaced_pod("bound", NS, grace_period_seconds=0)
    with pytest.raises(ApiException):
        core.read_namespaced_pod("bound", NS)

    core.create_namespaced_pod(NS, pod("loose"))
    reply = core.delete_namespaced_pod("loose", NS)
    assert reply.metadata.name == "loose"
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod("loose", NS)
    assert err.value.status == 404


def test_binding_an_already_bound_pod_is_a_409(core):
    core.create_namespaced_pod(NS, pod("twice"))
    target = {"metadata": {"name": "twice"}, "target": {"kind": "Node", "name": "n1"}}
    core.create_namespaced_pod_binding("twice", NS, target, _preload_content=False)
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod_binding("twice", NS, {**target, "target": {"kind": "Node", "name": "n2"}}, _preload_content=False)
    assert err.value.status == 409
    assert core.read_namespaced_pod("twice", NS).spec.node_name == "n1"


def test_delete_preconditions_on_uid_and_resource_version(core):
    created = core.create_namespaced_config_map(NS, cm("pre"))
    for pre in ({"uid": "00000000-0000-0000-0000-000000000000"}, {"resourceVersion": "1"}):
        with pytest.raises(ApiException) as err:
            core.delete_namespaced_config_map("pre", NS, body={"preconditions": pre})
        assert err.value.status == 409
        assert body_of(err.value)["reason"] == "Conflict"
    core.read_namespaced_config_map("pre", NS)
    core.delete_namespaced_config_map(
        "pre", NS, body={"preconditions": {"uid": created.metadata.uid, "resourceVersion": created.metadata.resource_version}}
    )
    with pytest.raises(ApiException):
        core.read_namespaced_config_map("pre", NS)


# -- scale ---------------------------------------------------------------------------


def test_scale_subresource_get_put_and_patch(apps):
    apps.create_namespaced_deployment(NS, deployment("sc", replicas=2))
    scale = apps.read_namespaced_deployment_scale("sc", NS)
    assert (scale.kind, scale.api_version, scale.spec.replicas) == ("Scale", "autoscaling/v1", 2)
    assert scale.status.selector == "app=sc"
    scale.spec.replicas = 5
    assert apps.replace_namespaced_deployment_scale("sc", NS, scale).spec.replicas == 5
    d = apps.read_namespaced_deployment("sc", NS)
    assert (d.spec.replicas, d.metadata.generation) == (5, 2)
    assert apps.patch_namespaced_deployment_scale("sc", NS, {"spec": {"replicas": 7}}).spec.replicas == 7
    assert apps.read_namespaced_deployment("sc", NS).spec.replicas == 7
    scale.spec.replicas = 1  # scale still carries the RV from before the two writes
    with pytest.raises(ApiException) as err:
        apps.replace_namespaced_deployment_scale("sc", NS, scale)
    assert err.value.status == 409
    assert apps.read_namespaced_deployment("sc", NS).spec.replicas == 7


# -- dry run -------------------------------------------------------------------------


def test_dry_run_on_create_update_patch_and_delete_stores_nothing(core):
    # compared by the namespace's objects: the store's own revision may move, as the server
    # writes in the background too (e.g. the FlowSchemas' Dangling conditions after a start)
    def state():
        return [(c.metadata.name, c.metadata.resource_version, c.data) for c in core.list_namespaced_config_map(NS).items]

    before = state()
    dry = core.create_namespaced_config_map(NS, cm("dry"), dry_run="All")
    assert dry.metadata.name == "dry" and dry.metadata.uid
    with pytest.raises(ApiException) as err:
        core.read_namespaced_config_map("dry", NS)
    assert err.value.status == 404
    assert state() == before

    real = core.create_namespaced_config_map(NS, cm("real", {"k": "orig"}))
    rv_real = real.metadata.resource_version
    with_real = state()
    real.data = {"k": "updated"}
    assert core.replace_namespaced_config_map("real", NS, real, dry_run="All").data == {"k": "updated"}
    assert core.patch_namespaced_config_map("real", NS, {"data": {"k": "patched"}}, dry_run="All").data == {"k": "patched"}
    core.delete_namespaced_config_map("real", NS, dry_run="All")
    stored = core.read_namespaced_config_map("real", NS)
    assert (stored.data, stored.metadata.resource_version) == ({"k": "orig"}, rv_real)
    assert state() == with_real


def test_an_unknown_dry_run_value_is_a_400(k8s):
    status, body = raw(k8s, "POST", f"/api/v1/namespaces/{NS}/configmaps", cm("x"), query=[("dryRun", "Some")])
    assert status == 400
    assert json.loads(body)["reason"] == "BadRequest"
