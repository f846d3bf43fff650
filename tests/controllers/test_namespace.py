"""The namespace controller deletes a namespace's content, then the namespace."""

from __future__ import annotations

import asyncio

from k8py.api.errors import NotFound
from k8py.client.resources import CONFIGMAPS, NAMESPACES, PODS, SECRETS, SERVICES
from tests.controllers.conftest import eventually


async def ns_gone(client, name: str) -> bool:
    try:
        await client.get(NAMESPACES, None, name)
        return False
    except NotFound:
        return True


def condition(ns: dict, kind: str) -> dict:
    return next((c for c in (ns.get("status") or {}).get("conditions") or () if c["type"] == kind), {})


async def test_a_namespace_with_a_hundred_objects_is_emptied_then_deleted(client, start_manager):
    await start_manager("namespace")
    await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "big"}})
    creates = []
    for i in range(40):
        creates.append(client.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{i}", "namespace": "big"}}))
        creates.append(client.create(SECRETS, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"s-{i}", "namespace": "big"}}))
    for i in range(15):
        creates.append(client.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p-{i}", "namespace": "big"},
                                            "spec": {"containers": [{"name": "c", "image": "i"}]}}))
        creates.append(client.create(SERVICES, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"svc-{i}", "namespace": "big"},
                                                "spec": {"ports": [{"port": 80}]}}))
    await asyncio.gather(*creates)
    await client.delete(NAMESPACES, None, "big")
    ns = await client.get(NAMESPACES, None, "big")
    assert ns["status"]["phase"] == "Terminating"
    await eventually(lambda: ns_gone(client, "big"), timeout=60)
    for resource in (CONFIGMAPS, SECRETS, PODS, SERVICES):
        assert (await client.list(resource, "big"))["items"] == []


async def test_content_held_by_a_finalizer_keeps_the_namespace_terminating(client, start_manager):
    await start_manager("namespace")
    await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "held"}})
    await client.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap",
                                     "metadata": {"name": "keep", "namespace": "held", "finalizers": ["example.com/hold"]}})
    await client.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "free", "namespace": "held"}})
    await client.delete(NAMESPACES, None, "held")

    async def reported():
        ns = await client.get(NAMESPACES, None, "held")
        return ns if condition(ns, "NamespaceFinalizersRemaining").get("status") == "True" else None

    ns = await eventually(reported, timeout=30)
    assert condition(ns, "NamespaceFinalizersRemaining")["message"] == (
        "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances")
    remaining = condition(ns, "NamespaceContentRemaining")
    assert remaining["status"] == "True" and remaining["reason"] == "SomeResourcesRemain"
    assert "configmaps. has 1 resource instances" in remaining["message"]
    assert condition(ns, "NamespaceDeletionDiscoveryFailure")["reason"] == "ResourcesDiscovered"
    assert [c["metadata"]["name"] for c in (await client.list(CONFIGMAPS, "held"))["items"]] == ["keep"]
    await client.patch(CONFIGMAPS, "held", "keep", {"metadata": {"finalizers": None}})
    await eventually(lambda: ns_gone(client, "held"), timeout=30)
