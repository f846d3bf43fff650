"""Cascading deletion in all three modes, dangling owners and cross-scope
owners, against a real API server."""

from __future__ import annotations

from k8py.api.errors import NotFound
from k8py.client.resources import CONFIGMAPS, CORE_EVENTS, DEPLOYMENTS, NAMESPACES, PODS, REPLICASETS
from tests.controllers.conftest import eventually
from tests.controllers.test_deployment import complete, deployment


async def exists(client, resource, namespace, name) -> bool:
    try:
        await client.get(resource, namespace, name)
        return True
    except NotFound:
        return False


async def gone(client, resource, namespace, name) -> bool:
    return not await exists(client, resource, namespace, name)


async def count(client, resource, selector: str) -> int:
    return len((await client.list(resource, "default", label_selector=selector))["items"])


def configmap(name: str, owner: dict | None = None, **owner_fields) -> dict:
    meta: dict = {"name": name, "namespace": "default"}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
                                    "uid": owner["metadata"]["uid"], **owner_fields}]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


async def test_background_deletion_removes_the_whole_tree(client, start_manager, driver):
    await start_manager("deployment", "replicaset", "garbagecollector")
    await client.create(DEPLOYMENTS, deployment("bg", 3))
    await eventually(lambda: complete(client, "bg", 3), timeout=60)
    await client.delete(DEPLOYMENTS, "default", "bg", propagation_policy="Background")
    await eventually(lambda: gone(client, DEPLOYMENTS, "default", "bg"))

    async def tree_gone():
        return await count(client, REPLICASETS, "app=bg") == 0 and await count(client, PODS, "app=bg") == 0

    await eventually(tree_gone, timeout=60)


async def test_foreground_deletion_deletes_dependents_before_the_owner(client, start_manager, driver):
    await start_manager("deployment", "replicaset", "garbagecollector")
    await client.create(DEPLOYMENTS, deployment("fg", 2))
    await eventually(lambda: complete(client, "fg", 2), timeout=60)
    await client.delete(DEPLOYMENTS, "default", "fg", propagation_policy="Foreground")
    d = await client.get(DEPLOYMENTS, "default", "fg")
    assert d["metadata"]["deletionTimestamp"] and "foregroundDeletion" in d["metadata"]["finalizers"]
    seen_owner_with_children_gone = False

    async def owner_gone():
        nonlocal seen_owner_with_children_gone
        owner_there = await exists(client, DEPLOYMENTS, "default", "fg")
        children = await count(client, REPLICASETS, "app=fg") + await count(client, PODS, "app=fg")
        if owner_there:
            seen_owner_with_children_gone = seen_owner_with_children_gone or children == 0
            return False
        assert children == 0, "the owner went before its dependents"
        return True

    await eventually(owner_gone, timeout=60)


async def test_orphan_deletion_keeps_dependents_without_the_reference(client, start_manager, driver):
    await start_manager("deployment", "replicaset", "garbagecollector")
    await client.create(DEPLOYMENTS, deployment("or", 2))
    await eventually(lambda: complete(client, "or", 2), timeout=60)
    await client.delete(DEPLOYMENTS, "default", "or", propagation_policy="Orphan")
    await eventually(lambda: gone(client, DEPLOYMENTS, "default", "or"), timeout=60)
    rss = (await client.list(REPLICASETS, "default", label_selector="app=or"))["items"]
    assert len(rss) == 1 and not rss[0]["metadata"].get("ownerReferences")
    assert await count(client, PODS, "app=or") == 2


async def test_a_dependent_of_an_owner_that_never_existed_is_deleted(client, start_manager):
    await start_manager("garbagecollector")
    ghost = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ghost", "uid": "00000000-0000-0000-0000-000000000001"}}
    await client.create(CONFIGMAPS, configmap("child", ghost))
    owner = await client.create(CONFIGMAPS, configmap("owner"))
    await client.create(CONFIGMAPS, configmap("kept", owner))
    await eventually(lambda: gone(client, CONFIGMAPS, "default", "child"), timeout=30)
    assert await exists(client, CONFIGMAPS, "default", "kept")


async def test_a_solid_owner_keeps_a_dependent_and_its_dangling_reference_is_dropped(client, start_manager):
    await start_manager("garbagecollector")
    owner = await client.create(CONFIGMAPS, configmap("owner"))
    body = configmap("both", owner)
    body["metadata"]["ownerReferences"].append({"apiVersion": "v1", "kind": "ConfigMap", "name": "gone",
                                                "uid": "00000000-0000-0000-0000-000000000002"})
    await client.create(CONFIGMAPS, body)

    async def dropped():
        refs = (await client.get(CONFIGMAPS, "default", "both"))["metadata"].get("ownerReferences") or []
        return [r["name"] for r in refs] == ["owner"]

    await eventually(dropped, timeout=30)


async def test_an_owner_in_another_namespace_is_not_an_owner(client, start_manager):
    await start_manager("garbagecollector")
    await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    other_owner = await client.create(CONFIGMAPS, {**configmap("owner"), "metadata": {"name": "owner", "namespace": "other"}})
    await client.create(CONFIGMAPS, configmap("cross", other_owner))
    await eventually(lambda: gone(client, CONFIGMAPS, "default", "cross"), timeout=30)
    assert await exists(client, CONFIGMAPS, "other", "owner")


async def test_a_cluster_scoped_object_owned_by_a_namespaced_one_is_refused(client, start_manager):
    await start_manager("garbagecollector")
    owner = await client.create(CONFIGMAPS, configmap("ns-owner"))
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "owned", "ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "ns-owner", "uid": owner["metadata"]["uid"]}]}}
    await client.create(NAMESPACES, ns)

    async def warned():
        events = (await client.list(CORE_EVENTS, "default"))["items"]
        return [e for e in events if e["reason"] == "OwnerRefInvalidNamespace"]

    events = await eventually(warned, timeout=30)
    assert events[0]["involvedObject"]["name"] == "owned" and events[0]["type"] == "Warning"


async def test_collector_shares_the_pod_and_replicaset_watches_other_controllers_keep(client, start_manager, driver):
    manager = await start_manager("deployment", "replicaset", "garbagecollector")
    gc = manager.controllers["garbagecollector"]
    await eventually(lambda: _ready(gc))
    shared = manager.context.informers
    assert gc.monitors.informers[("", "pods")] is shared.existing("", "pods")
    assert gc.monitors.informers[("apps", "replicasets")] is shared.existing("apps", "replicasets")
    assert ("", "configmaps") in gc.monitors.informers and shared.existing("", "configmaps") is None  # its own, metadata only
    # and cascading still works through the shared ones
    await client.create(DEPLOYMENTS, deployment("shared", 2))
    await eventually(lambda: complete(client, "shared", 2), timeout=60)
    await client.delete(DEPLOYMENTS, "default", "shared", propagation_policy="Background")

    async def tree_gone():
        return await count(client, REPLICASETS, "app=shared") == 0 and await count(client, PODS, "app=shared") == 0

    await eventually(tree_gone, timeout=60)


async def _ready(gc) -> bool:
    return bool(gc.monitors.informers) and gc.monitors.has_synced()


def _requests(server, verb: str, resource: str) -> float:
    import re
    import urllib.request

    with urllib.request.urlopen(f"{server.url}/metrics", timeout=30) as r:
        text = r.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("apiserver_request_total{"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}", 1)[0]))
            if labels.get("verb") == verb and labels.get("resource") == resource:
                total += float(line.rsplit(" ", 1)[1])
    return total


async def test_dependents_of_a_deleted_owner_are_deleted_without_reading_each_first(client, server, start_manager):
    await start_manager("garbagecollector")
    owner = await client.create(CONFIGMAPS, configmap("many-owner"))
    for i in range(10):
        await client.create(CONFIGMAPS, configmap(f"many-{i}", owner))
    await client.create(CONFIGMAPS, configmap("many-unrelated"))

    async def listed(prefix: str) -> int:
        return len([c for c in (await client.list(CONFIGMAPS, "default"))["items"] if c["metadata"]["name"].startswith(prefix)])

    gets = _requests(server, "GET", "configmaps")
    await client.delete(CONFIGMAPS, "default", "many-owner", propagation_policy="Background")
    await eventually(lambda: _is(listed("many-"), 1), timeout=30)
    assert await exists(client, CONFIGMAPS, "default", "many-unrelated")
    gets += 1  # that read
    # the owner was seen deleted: its dependents are deleted with a resourceVersion precondition, none read first
    assert _requests(server, "GET", "configmaps") - gets == 0


async def _is(value, want) -> bool:
    return await value == want
