"""Controllers that discover resources at run time cover custom resources:
the namespace controller deletes a namespace's custom objects, the garbage
collector deletes a custom object whose owner is gone."""

from __future__ import annotations

from k8py.api.errors import NotFound
from k8py.client.resource import Resource
from k8py.client.resources import CONFIGMAPS, NAMESPACES
from tests.controllers.conftest import eventually

CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", False, "CustomResourceDefinition")
WIDGETS = Resource("example.com", "v1", "widgets", True, "Widget")


async def make_crd(client) -> None:
    await client.create(CRDS, {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                     "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]},
    })

    async def established():
        crd = await client.get(CRDS, None, "widgets.example.com")
        return any(c["type"] == "Established" and c["status"] == "True"
                   for c in (crd.get("status") or {}).get("conditions") or [])

    await eventually(established, timeout=30)


async def gone(client, resource, namespace, name) -> bool:
    try:
        await client.get(resource, namespace, name)
        return False
    except NotFound:
        return True


async def test_namespace_deletion_deletes_its_custom_objects(client, start_manager):
    await make_crd(client)
    await start_manager("namespace")
    await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    for i in range(3):
        await client.create(WIDGETS, {"apiVersion": "example.com/v1", "kind": "Widget",
                                      "metadata": {"name": f"w{i}", "namespace": "team"}})
    await client.delete(NAMESPACES, None, "team")
    await eventually(lambda: gone(client, NAMESPACES, None, "team"), timeout=60)
    assert (await client.list(WIDGETS, "team"))["items"] == []


async def test_the_garbage_collector_deletes_a_custom_object_whose_owner_is_gone(client, start_manager):
    await make_crd(client)
    await start_manager("garbagecollector")
    owner = await client.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap",
                                             "metadata": {"name": "owner", "namespace": "default"}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    await client.create(WIDGETS, {"apiVersion": "example.com/v1", "kind": "Widget",
                                  "metadata": {"name": "owned", "namespace": "default", "ownerReferences": [ref]}})
    await client.delete(CONFIGMAPS, "default", "owner")
    await eventually(lambda: gone(client, WIDGETS, "default", "owned"), timeout=60)
