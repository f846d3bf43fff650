"""SharedIndexInformer, listers and the factory against a real server."""

from __future__ import annotations

import asyncio
import contextlib
from typing import AsyncIterator

from k8py.client.indexer import index_by_label
from k8py.client.informer_factory import InformerFactory
from k8py.client.keys import DeletedFinalStateUnknown
from k8py.client.processor_listener import ADD, DELETE, UPDATE, Notification, ProcessorListener
from k8py.client.resources import CONFIGMAPS, SECRETS
from k8py.client.shared_informer import SharedIndexInformer, drop_managed_fields
from tests.client.conftest import configmap, eventually


@contextlib.asynccontextmanager
async def running(informer: SharedIndexInformer) -> AsyncIterator[SharedIndexInformer]:
    task = asyncio.create_task(informer.run(), name="test-informer")
    try:
        assert await informer.wait_for_cache_sync(timeout=10)
        yield informer
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _recorder(log: list):
    return dict(
        on_add=lambda o: log.append(("add", o["metadata"]["name"], o["data"].get("v") if o.get("data") else None)),
        on_update=lambda old, new: log.append(("update", new["metadata"]["name"], new["data"].get("v"))),
        on_delete=lambda o: log.append(("delete", (o.obj if isinstance(o, DeletedFinalStateUnknown) else o)["metadata"]["name"], None)),
    )


async def test_handlers_see_add_update_delete_in_order(client):
    informer = SharedIndexInformer(client, CONFIGMAPS, namespace="default")
    log: list = []
    informer.add_event_handler(**_recorder(log))
    async with running(informer):
        await client.create(CONFIGMAPS, configmap("a", v="1"))
        await client.patch(CONFIGMAPS, "default", "a", {"data": {"v": "2"}})
        await client.delete(CONFIGMAPS, "default", "a")
        await eventually(lambda: len(log) == 3)
    assert log == [("add", "a", "1"), ("update", "a", "2"), ("delete", "a", None)]


async def test_slow_handler_does_not_block_a_fast_one(client):
    informer = SharedIndexInformer(client, CONFIGMAPS, namespace="default")
    release = asyncio.Event()
    slow_seen: list[str] = []
    fast_seen: list[str] = []

    async def slow(obj):
        await release.wait()
        slow_seen.append(obj["metadata"]["name"])

    informer.add_event_handler(on_add=slow)
    informer.add_event_handler(on_add=lambda o: fast_seen.append(o["metadata"]["name"]))
    async with running(informer):
        for i in range(20):
            await client.create(CONFIGMAPS, configmap(f"c{i}"))
        await eventually(lambda: len(fast_seen) == 20)
        assert slow_seen == [] and len(informer.indexer) == 20
        release.set()
        await eventually(lambda: len(slow_seen) == 20)
    assert slow_seen == fast_seen


async def test_full_buffer_coalesces_per_key_and_keeps_order():
    seen: list[tuple] = []
    release = asyncio.Event()

    class Handler:
        async def on_add(self, obj):
            await release.wait()
            seen.append(("add", obj["k"], obj["v"]))

        def on_update(self, old, new):
            seen.append(("update", new["k"], old["v"], new["v"]))

        def on_delete(self, obj):
            seen.append(("delete", obj["k"], obj["v"]))

    def obj(k, v):
        return {"metadata": {"name": k, "namespace": "ns"}, "k": k, "v": v}

    listener = ProcessorListener(Handler(), buffer_size=2)
    task = asyncio.create_task(listener.run(), name="listener")
    listener.offer(Notification(ADD, None, obj("a", 1)))
    listener.offer(Notification(ADD, None, obj("b", 1)))
    listener.offer(Notification(UPDATE, obj("a", 1), obj("a", 2)))  # buffer full: lagging from here
    listener.offer(Notification(UPDATE, obj("a", 2), obj("a", 3)))
    listener.offer(Notification(ADD, None, obj("c", 1)))
    listener.offer(Notification(DELETE, None, obj("c", 1)))  # never seen by the handler: vanishes
    listener.offer(Notification(UPDATE, obj("b", 1), obj("b", 2)))
    listener.offer(Notification(DELETE, None, obj("b", 2)))
    assert listener.pending == 5 and listener.is_lagging
    release.set()
    await asyncio.wait_for(listener.wait_idle(), 5)
    task.cancel()
    assert seen == [("add", "a", 1), ("add", "b", 1), ("update", "a", 1, 3), ("delete", "b", 2)]
    assert listener.coalesced == 3 and not listener.is_lagging


async def test_resync_redelivers_the_cache_as_updates(client):
    await client.create(CONFIGMAPS, configmap("r", v="1"))
    informer = SharedIndexInformer(client, CONFIGMAPS, namespace="default")
    syncs: list = []
    plain: list = []
    informer.add_event_handler(on_update=lambda old, new: syncs.append(old is new or old == new), resync_period=1.0)
    informer.add_event_handler(on_update=lambda old, new: plain.append(1))
    async with running(informer):
        await eventually(lambda: len(syncs) >= 1, timeout=5)
    assert all(syncs) and plain == []


async def test_transform_runs_before_objects_enter_the_cache(client):
    await client.apply(CONFIGMAPS, configmap("t", v="1"), field_manager="me")
    informer = SharedIndexInformer(client, CONFIGMAPS, namespace="default", transform=drop_managed_fields)
    added: list = []
    informer.add_event_handler(on_add=added.append)
    async with running(informer):
        await eventually(lambda: len(added) == 1)
        assert "managedFields" not in informer.lister.get("default", "t")["metadata"]
        assert "managedFields" not in added[0]["metadata"]


async def test_listers_and_indexers_read_the_cache(client):
    for name, team in (("a", "x"), ("b", "y"), ("c", "x")):
        await client.create(CONFIGMAPS, {"metadata": {"name": name, "namespace": "default", "labels": {"team": team}}})
    informer = SharedIndexInformer(client, CONFIGMAPS, indexers={"team": index_by_label("team")})
    async with running(informer):
        await eventually(lambda: len(informer.lister.list(namespace="default")) >= 3)
        assert informer.lister.get("default", "b")["metadata"]["labels"] == {"team": "y"}
        assert sorted(o["metadata"]["name"] for o in informer.lister.list("team=x")) == ["a", "c"]
        assert sorted(o["metadata"]["name"] for o in informer.indexer.by_index("team", "y")) == ["b"]
        assert informer.lister.try_get("default", "zzz") is None


async def test_a_late_handler_first_gets_the_cache_as_adds(client):
    await client.create(CONFIGMAPS, configmap("early"))
    informer = SharedIndexInformer(client, CONFIGMAPS, namespace="default")
    async with running(informer):
        late: list = []
        informer.add_event_handler(on_add=lambda o: late.append(o["metadata"]["name"]))
        await client.create(CONFIGMAPS, configmap("later"))
        await eventually(lambda: late == ["early", "later"])


async def test_factory_shares_one_informer_per_resource(client):
    factory = InformerFactory(client, namespace="default")
    assert factory.informer(CONFIGMAPS) is factory.informer(CONFIGMAPS)
    assert factory.informer(SECRETS) is not factory.informer(CONFIGMAPS)
    assert factory.lister(CONFIGMAPS) is factory.informer(CONFIGMAPS).lister
    await client.create(CONFIGMAPS, configmap("f"))
    factory.start()
    try:
        assert await factory.wait_for_cache_sync(timeout=10)
        assert factory.lister(CONFIGMAPS).get("default", "f")
    finally:
        await factory.shutdown()
