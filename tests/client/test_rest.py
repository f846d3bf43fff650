"""The REST client against a real k8py API server."""

from __future__ import annotations

import asyncio

import pytest

from k8py.api.errors import AlreadyExists, Conflict, Expired, Invalid, NotFound
from k8py.client.config import ClientConfig
from k8py.client.resource import Resource
from k8py.client.resources import CONFIGMAPS, LEASES, NAMESPACES, PODS, SERVICES
from k8py.client.rest import PatchType, RestClient, RetryPolicy
from k8py.client.transport import TransportError
from tests.client.conftest import configmap


async def test_create_get_update_delete_round_trip(client):
    created = await client.create(CONFIGMAPS, configmap("a", x="1"))
    assert created["metadata"]["resourceVersion"]
    got = await client.get(CONFIGMAPS, "default", "a")
    assert got["data"] == {"x": "1"}
    got["data"]["x"] = "2"
    updated = await client.update(CONFIGMAPS, got)
    assert updated["data"] == {"x": "2"}
    assert int(updated["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    await client.delete(CONFIGMAPS, "default", "a")
    with pytest.raises(NotFound) as info:
        await client.get(CONFIGMAPS, "default", "a")
    assert info.value.name == "a"


async def test_errors_are_typed_from_the_status_body(client):
    await client.create(CONFIGMAPS, configmap("dup"))
    with pytest.raises(AlreadyExists):
        await client.create(CONFIGMAPS, configmap("dup"))
    stale = await client.get(CONFIGMAPS, "default", "dup")
    await client.update(CONFIGMAPS, {**stale, "data": {"v": "1"}})
    with pytest.raises(Conflict):
        await client.update(CONFIGMAPS, {**stale, "data": {"v": "2"}})
    with pytest.raises(Invalid):
        await client.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}})
    with pytest.raises(NotFound):
        await client.delete(CONFIGMAPS, "default", "missing")


async def test_delete_precondition_on_a_stale_uid_is_a_conflict(client):
    await client.create(CONFIGMAPS, configmap("pre"))
    with pytest.raises(Conflict):
        await client.delete(CONFIGMAPS, "default", "pre", preconditions={"uid": "not-the-uid"})
    await client.get(CONFIGMAPS, "default", "pre")


async def test_list_all_follows_continue_tokens_and_keeps_the_first_page_revision(client):
    for i in range(25):
        await client.create(CONFIGMAPS, configmap(f"page-{i:02d}"))
    pages = [p async for p in client.list_pages(CONFIGMAPS, "default", limit=10)]
    assert [len(p["items"]) for p in pages] == [10, 10, 5]
    joined = await client.list_all(CONFIGMAPS, "default", limit=10)
    names = [o["metadata"]["name"] for o in joined["items"]]
    assert names == [f"page-{i:02d}" for i in range(25)]
    assert "continue" not in joined["metadata"]
    assert joined["metadata"]["resourceVersion"] == pages[0]["metadata"]["resourceVersion"]


async def test_list_filters_by_label_selector(client):
    await client.create(CONFIGMAPS, {**configmap("l1"), "metadata": {"name": "l1", "namespace": "default", "labels": {"app": "x"}}})
    await client.create(CONFIGMAPS, configmap("l2"))
    listed = await client.list(CONFIGMAPS, "default", label_selector="app=x")
    assert [o["metadata"]["name"] for o in listed["items"]] == ["l1"]


async def test_all_four_patch_types(client):
    await client.create(SERVICES, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "default"},
                                   "spec": {"ports": [{"name": "a", "port": 80}]}})
    await client.create(CONFIGMAPS, configmap("p", a="1"))
    out = await client.patch(CONFIGMAPS, "default", "p", {"data": {"b": "2"}}, patch_type=PatchType.MERGE)
    assert out["data"] == {"a": "1", "b": "2"}
    out = await client.patch(CONFIGMAPS, "default", "p", [{"op": "remove", "path": "/data/a"}], patch_type=PatchType.JSON)
    assert out["data"] == {"b": "2"}
    svc = await client.patch(SERVICES, "default", "s", {"spec": {"ports": [{"name": "b", "port": 81}]}}, patch_type=PatchType.STRATEGIC)
    assert sorted(p["port"] for p in svc["spec"]["ports"]) == [80, 81]
    applied = await client.apply(CONFIGMAPS, configmap("p", c="3"), field_manager="tester", force=True)
    assert applied["data"]["c"] == "3"
    assert any(m.get("manager") == "tester" for m in applied["metadata"]["managedFields"])


async def test_apply_creates_and_status_subresource_updates(client):
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l", "namespace": "default"},
             "spec": {"holderIdentity": "me"}}
    created = await client.apply(LEASES, lease, field_manager="tester")
    assert (await client.get(LEASES, "default", "l"))["spec"]["holderIdentity"] == "me"
    assert created["metadata"]["uid"]
    ns = await client.get(NAMESPACES, None, "default")
    status = await client.get(NAMESPACES, None, "default", subresource="status")
    assert status["metadata"]["name"] == ns["metadata"]["name"]


async def test_delete_collection_removes_only_selected(client):
    for i in range(3):
        await client.create(CONFIGMAPS, {"metadata": {"name": f"dc{i}", "namespace": "default", "labels": {"g": "1"}}})
    await client.create(CONFIGMAPS, configmap("keep"))
    await client.delete_collection(CONFIGMAPS, "default", label_selector="g=1")
    names = {o["metadata"]["name"] for o in (await client.list(CONFIGMAPS, "default"))["items"]}
    assert "keep" in names and not names & {"dc0", "dc1", "dc2"}


async def test_watch_yields_typed_events_in_order_from_a_resource_version(client):
    start = (await client.list(CONFIGMAPS, "default"))["metadata"]["resourceVersion"]
    await client.create(CONFIGMAPS, configmap("w", v="1"))
    await client.patch(CONFIGMAPS, "default", "w", {"data": {"v": "2"}})
    await client.delete(CONFIGMAPS, "default", "w")
    seen = []
    async with client.watch(CONFIGMAPS, "default", resource_version=start, timeout_seconds=5) as events:
        async for event in events:
            if event.type != "BOOKMARK":
                seen.append((event.type, event.object["metadata"]["name"]))
            if len(seen) == 3:
                break
    assert seen == [("ADDED", "w"), ("MODIFIED", "w"), ("DELETED", "w")]


async def test_watch_from_a_compacted_revision_raises_expired(tmp_path):
    from tests.support.servers import ServerThread, sqlite_storage

    with ServerThread(sqlite_storage(str(tmp_path / "d")), watch_cache_capacity=10) as server:
        async with RestClient(ClientConfig(server=server.url)) as c:
            first = await c.create(CONFIGMAPS, configmap("old"))
            for i in range(30):
                await c.patch(CONFIGMAPS, "default", "old", {"data": {"i": str(i)}})
            with pytest.raises(Expired):
                async for _ in c.watch(CONFIGMAPS, "default", resource_version=first["metadata"]["resourceVersion"], timeout_seconds=5):
                    pass


async def test_streaming_list_ends_initial_events_with_a_bookmark(client):
    await client.create(CONFIGMAPS, configmap("s1"))
    types = []
    async for event in client.watch(CONFIGMAPS, "default", send_initial_events=True, timeout_seconds=5):
        types.append(event.type)
        if event.is_initial_events_end:
            break
    assert types[-1] == "BOOKMARK" and "ADDED" in types


async def test_discovery_finds_resources_by_kind_plural_and_short_name(client):
    assert await client.discovery.resource_for("Pod") == PODS
    assert await client.discovery.resource_for("po") == PODS
    assert await client.discovery.resource_for("leases") == LEASES
    assert (await client.discovery.resource_for("deployments.apps")).kind == "Deployment"
    with pytest.raises(NotFound):
        await client.discovery.resource_for("frobnicators")


async def test_discovery_result_is_cached(client):
    first = await client.discovery.server_resources()
    assert first is await client.discovery.server_resources()


async def test_connection_refused_is_retried_then_raised():
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    async with RestClient(ClientConfig(server=f"http://127.0.0.1:{port}"), retry=RetryPolicy(max_attempts=3, initial=0.01, cap=0.02)) as c:
        started = asyncio.get_running_loop().time()
        with pytest.raises(TransportError) as info:
            await c.get(CONFIGMAPS, "default", "x")
        assert info.value.request_sent is False
        assert asyncio.get_running_loop().time() - started < 2


def test_resource_paths_are_built_in_one_place():
    assert PODS.path("ns", "p", "status") == "/api/v1/namespaces/ns/pods/p/status"
    assert PODS.path() == "/api/v1/pods"
    assert LEASES.path("kube-system") == "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
    assert NAMESPACES.path(None, "default") == "/api/v1/namespaces/default"
    assert Resource("", "v1", "configmaps").path("ns", "a/b") == "/api/v1/namespaces/ns/configmaps/a%2Fb"
    with pytest.raises(ValueError):
        NAMESPACES.path("ns", "x")
