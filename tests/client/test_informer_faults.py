"""A bad object or a failing user callback never kills an informer.

client-go logs such errors (``utilruntime.HandleError``) and carries on; so
does k8py, counting each one. Each test checks that the informer task is
still running and still delivers later changes after the failure.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import AsyncIterator

from k8py.client.informer_factory import InformerFactory
from k8py.client.resources import CONFIGMAPS, SECRETS
from k8py.client.shared_informer import SharedIndexInformer
from tests.client.conftest import configmap, eventually


@contextlib.asynccontextmanager
async def running(informer: SharedIndexInformer) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(informer.run(), name="test-informer")
    try:
        assert await informer.wait_for_cache_sync(timeout=30)
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _name(obj) -> str:
    return obj["metadata"]["name"]


def _poisoned(name: str):
    def check(obj):
        if isinstance(obj, dict) and obj.get("metadata", {}).get("name") == name:
            raise RuntimeError(f"boom on {name}")
        return obj

    return check


async def test_a_handler_that_raises_does_not_stop_later_deliveries(client):
    informer = SharedIndexInformer(client, CONFIGMAPS, namespace="default")
    seen: list[str] = []

    def on_add(obj):
        if _name(obj) == "bad":
            raise RuntimeError("handler bug")
        seen.append(_name(obj))

    listener = informer.add_event_handler(on_add=on_add)
    async with running(informer) as task:
        for name in ("a", "bad", "b"):
            await client.create(CONFIGMAPS, configmap(name))
        await eventually(lambda: seen == ["a", "b"], timeout=30)
        assert not task.done()
        assert listener.handler_errors == 1


async def test_a_transform_that_raises_skips_that_object_only(client):
    await client.create(CONFIGMAPS, configmap("listed-bad"))
    await client.create(CONFIGMAPS, configmap("listed-good"))
    seen: list[str] = []

    def transform(obj):
        return _poisoned("listed-bad")(_poisoned("watched-bad")(obj))

    informer = SharedIndexInformer(client, CONFIGMAPS, namespace="default", transform=transform)
    informer.add_event_handler(on_add=lambda o: seen.append(_name(o)))
    async with running(informer) as task:
        assert "default/listed-good" in informer.indexer and "default/listed-bad" not in informer.indexer
        await client.create(CONFIGMAPS, configmap("watched-bad"))
        await client.create(CONFIGMAPS, configmap("watched-good"))
        await eventually(lambda: "watched-good" in seen, timeout=30)
        assert not task.done()
        assert "watched-bad" not in seen and "default/watched-bad" not in informer.indexer
        assert informer.reflector.store_errors == 2


async def test_an_index_function_that_raises_leaves_the_cache_consistent(client):
    def by_owner(obj):
        if _name(obj) == "bad":
            raise KeyError("owner")
        return [obj["metadata"].get("labels", {}).get("owner", "")]

    informer = SharedIndexInformer(client, CONFIGMAPS, namespace="default", indexers={"owner": by_owner})
    seen: list[str] = []
    informer.add_event_handler(on_add=lambda o: seen.append(_name(o)))
    async with running(informer) as task:
        for name in ("a", "bad", "b"):
            await client.create(CONFIGMAPS, configmap(name))
        await eventually(lambda: seen == ["a", "b"], timeout=30)
        assert not task.done()
        assert "default/bad" not in informer.indexer  # an update either applies whole or not at all
        assert sorted(informer.indexer.index_keys("owner", "")) == ["default/a", "default/b"]
        assert informer.process_errors == 1


async def test_one_failing_informer_does_not_stop_the_factory(client):
    factory = InformerFactory(client, namespace="default")
    broken = factory.informer(CONFIGMAPS, indexers={"boom": lambda o: [_name(_poisoned("cm-bad")(o))]})
    healthy = factory.informer(SECRETS)
    secrets_seen: list[str] = []
    healthy.add_event_handler(on_add=lambda o: secrets_seen.append(_name(o)))
    run = asyncio.create_task(factory.run(), name="test-factory")
    try:
        assert await factory.wait_for_cache_sync(timeout=30)
        await client.create(CONFIGMAPS, configmap("cm-bad"))
        await eventually(lambda: broken.process_errors == 1, timeout=30)
        await client.create(SECRETS, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1", "namespace": "default"}})
        await client.create(CONFIGMAPS, configmap("cm-good"))
        await eventually(lambda: secrets_seen == ["s1"] and "default/cm-good" in broken.indexer, timeout=30)
        assert not run.done()
    finally:
        run.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await run
