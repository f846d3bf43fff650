"""lightkube and the official client create, patch, apply and watch custom
resources against k8py unchanged (generic resources, the dynamic client)."""

from __future__ import annotations

import threading
import time

import kubernetes
import pytest

from tests.support.kube import Kubectl

GROUP = "clients.example.com"
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": f"gizmos.{GROUP}"},
    "spec": {"group": GROUP, "scope": "Namespaced",
             "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "properties": {"spec": {
                     "type": "object",
                     "x-kubernetes-validations": [{"rule": "self.size <= 10", "message": "size is at most 10"}],
                     "properties": {"size": {"type": "integer"}, "color": {"type": "string"}}}}}}}]},
}


@pytest.fixture
def kubeconfig(kubectl: Kubectl, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("KUBECONFIG", kubectl.kubeconfig)
    return kubectl.kubeconfig


def _wait_served(check) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            check()
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_lightkube_creates_patches_applies_and_watches_a_custom_resource(kubeconfig: str) -> None:
    from lightkube import ApiError, Client
    from lightkube.generic_resource import create_namespaced_resource
    from lightkube.models.meta_v1 import ObjectMeta
    from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
    from lightkube.types import PatchType

    client = Client(field_manager="lightkube-test")
    client.create(CustomResourceDefinition.from_dict(CRD))
    Gizmo = create_namespaced_resource(GROUP, "v1", "Gizmo", "gizmos")
    _wait_served(lambda: client.list(Gizmo, namespace="default"))

    client.create(Gizmo(metadata=ObjectMeta(name="g1"), spec={"size": 1}))
    client.patch(Gizmo, "g1", {"spec": {"color": "red"}}, patch_type=PatchType.MERGE)
    assert client.get(Gizmo, "g1").spec == {"size": 1, "color": "red"}
    applied = client.apply(Gizmo(metadata=ObjectMeta(name="g2"), spec={"size": 2}))
    assert applied.spec == {"size": 2}
    assert sorted(g.metadata.name for g in client.list(Gizmo, namespace="default")) == ["g1", "g2"]
    with pytest.raises(ApiError) as err:
        client.create(Gizmo(metadata=ObjectMeta(name="big"), spec={"size": 11}))
    assert err.value.status.code == 422
    assert err.value.status.message == \
        f'Gizmo.{GROUP} "big" is invalid: spec: Invalid value: "object": size is at most 10'

    seen: list[tuple[str, str]] = []
    start = client.get(Gizmo, "g2").metadata.resourceVersion

    def watch() -> None:
        for op, obj in client.watch(Gizmo, namespace="default", resource_version=start):
            seen.append((op, obj.metadata.name))
            return

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    client.apply(Gizmo(metadata=ObjectMeta(name="g2"), spec={"size": 3}))
    thread.join(20)
    assert seen == [("MODIFIED", "g2")]


def test_the_official_client_creates_patches_applies_and_watches_a_custom_resource(k8s) -> None:
    kubernetes.client.ApiextensionsV1Api(k8s).create_custom_resource_definition(CRD)
    api = kubernetes.client.CustomObjectsApi(k8s)
    _wait_served(lambda: api.list_namespaced_custom_object(GROUP, "v1", "default", "gizmos"))

    body = {"apiVersion": f"{GROUP}/v1", "kind": "Gizmo", "metadata": {"name": "o1"}, "spec": {"size": 1}}
    api.create_namespaced_custom_object(GROUP, "v1", "default", "gizmos", body)
    api.patch_namespaced_custom_object(GROUP, "v1", "default", "gizmos", "o1", {"spec": {"color": "blue"}})
    assert api.get_namespaced_custom_object(GROUP, "v1", "default", "gizmos", "o1")["spec"] == {
        "size": 1, "color": "blue"}

    dynamic = kubernetes.dynamic.DynamicClient(k8s)
    gizmos = dynamic.resources.get(api_version=f"{GROUP}/v1", kind="Gizmo")
    applied = gizmos.server_side_apply(
        body={"apiVersion": f"{GROUP}/v1", "kind": "Gizmo", "metadata": {"name": "o2", "namespace": "default"},
              "spec": {"size": 4}}, field_manager="official-test")
    assert applied.spec.size == 4
    managers = [m["manager"] for m in applied.to_dict()["metadata"]["managedFields"]]
    assert managers == ["official-test"]

    listed = api.list_namespaced_custom_object(GROUP, "v1", "default", "gizmos")
    events: list[tuple[str, str]] = []
    done = threading.Event()

    def watch() -> None:
        w = kubernetes.watch.Watch()
        for event in w.stream(api.list_namespaced_custom_object, GROUP, "v1", "default", "gizmos",
                              resource_version=listed["metadata"]["resourceVersion"], timeout_seconds=30):
            events.append((event["type"], event["object"]["metadata"]["name"]))
            if len(events) == 2:
                w.stop()
        done.set()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    api.patch_namespaced_custom_object(GROUP, "v1", "default", "gizmos", "o2", {"spec": {"size": 5}})
    api.delete_namespaced_custom_object(GROUP, "v1", "default", "gizmos", "o1")
    assert done.wait(60)
    assert events == [("MODIFIED", "o2"), ("DELETED", "o1")]
