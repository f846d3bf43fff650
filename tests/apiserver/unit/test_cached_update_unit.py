"""ObjectStore updates that start from the watch cache's copy (``cached_read``)
over the in-memory store: every outcome is the one the *stored* state gives,
however far behind the copy is, and a copy that is current saves the store
read."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from k8py.api.errors import Conflict, NotFound
from k8py.apiserver.store.object_store import ObjectStore
from k8py.apiserver.watch.cacher import Cacher
from tests.support.fake_storage import MemoryStorage


def cm(name: str, value: str = "v", **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, **meta}, "data": {"k": value}}


class FrozenCopies:
    """A watch cache that stopped: it answers with the copies taken by ``freeze``."""

    def __init__(self) -> None:
        self.copies: dict[str, tuple[bytes, int]] = {}
        self.reads = 0

    def freeze(self, key: str, obj: dict[str, Any]) -> None:
        self.copies[key] = (orjson.dumps(obj), int(obj["metadata"]["resourceVersion"]))

    def __call__(self, _definition: Any, key: str) -> tuple[bytes, int] | None:
        self.reads += 1
        return self.copies.get(key)


class CountingReads(MemoryStorage):
    def __init__(self) -> None:
        super().__init__()
        self.gets = 0

    async def get(self, key: str, *, revision: int = 0):  # type: ignore[override]
        self.gets += 1
        return await super().get(key, revision=revision)


@pytest.fixture
async def memory():
    store = CountingReads()
    await store.start()
    yield store
    await store.close()


@pytest.fixture
def copies() -> FrozenCopies:
    return FrozenCopies()


@pytest.fixture
def store(memory, copies) -> ObjectStore:
    s = ObjectStore(memory)
    s.cached_read = copies
    return s


def set_value(value: str):
    def mutate(obj: dict[str, Any]) -> dict[str, Any]:
        obj["data"] = {"k": value}
        return obj
    return mutate


async def test_a_current_copy_saves_the_store_read(store, memory, copies, configmaps):
    created = await store.create(configmaps, "default", cm("a"))
    copies.freeze(configmaps.key("default", "a"), created)
    memory.gets = 0
    updated = await store.guaranteed_update(configmaps, "default", "a", set_value("w"))
    assert updated["data"] == {"k": "w"}
    assert int(updated["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    assert memory.gets == 0 and copies.reads == 1


async def test_a_stale_copy_loses_the_guarded_write_and_the_update_is_redone_on_the_stored_state(store, memory, copies, configmaps):
    created = await store.create(configmaps, "default", cm("a"))
    copies.freeze(configmaps.key("default", "a"), created)
    await store.guaranteed_update(configmaps, "default", "a", lambda o: {**o, "metadata": {**o["metadata"], "labels": {"x": "1"}}})
    seen: list[dict[str, Any]] = []

    def mutate(obj: dict[str, Any]) -> dict[str, Any]:
        seen.append(dict(obj["metadata"].get("labels") or {}))
        obj["data"] = {"k": "w"}
        return obj

    updated = await store.guaranteed_update(configmaps, "default", "a", mutate)
    assert seen == [{}, {"x": "1"}]  # first from the stale copy, then from the store
    assert updated["metadata"]["labels"] == {"x": "1"} and updated["data"] == {"k": "w"}


async def test_a_precondition_on_the_stored_revision_holds_although_the_copy_is_older(store, copies, configmaps):
    created = await store.create(configmaps, "default", cm("a"))
    copies.freeze(configmaps.key("default", "a"), created)
    latest = await store.guaranteed_update(configmaps, "default", "a", set_value("2"))
    body = cm("a", "3", resourceVersion=latest["metadata"]["resourceVersion"])
    updated, created_now = await store.update(configmaps, "default", "a", body)
    assert not created_now and updated["data"] == {"k": "3"}
    stale = cm("a", "4", resourceVersion=created["metadata"]["resourceVersion"])
    with pytest.raises(Conflict):
        await store.update(configmaps, "default", "a", stale)


async def test_a_refusal_computed_from_a_stale_copy_is_decided_again_on_the_stored_state(store, copies, pods):
    created = await store.create(pods, "default", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    # the copy says the pod is bound already; the store says it is not
    bound = orjson.loads(orjson.dumps(created))
    bound["spec"]["nodeName"] = "elsewhere"
    copies.freeze(pods.key("default", "p"), bound)

    def bind(obj: dict[str, Any]) -> dict[str, Any]:
        if obj["spec"].get("nodeName"):
            raise Conflict.for_object("pods", "p", "pod p is already assigned")
        obj["spec"]["nodeName"] = "node-0"
        return obj

    result = await store.guaranteed_update(pods, "default", "p", bind, subresource="binding")
    assert result["spec"]["nodeName"] == "node-0"
    with pytest.raises(Conflict):  # and the stored state refuses for real
        await store.guaranteed_update(pods, "default", "p", bind, subresource="binding")


async def test_a_no_op_from_a_copy_is_confirmed_on_the_store_and_writes_nothing(store, memory, copies, configmaps):
    created = await store.create(configmaps, "default", cm("a"))
    copies.freeze(configmaps.key("default", "a"), created)
    memory.gets = 0
    same = await store.guaranteed_update(configmaps, "default", "a", lambda o: o)
    assert same["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert memory.gets == 1  # the store confirmed the no-op
    assert (await memory.get(configmaps.key("default", "a"))).mod_revision == int(created["metadata"]["resourceVersion"])


async def test_an_object_missing_from_the_copies_is_read_from_the_store(store, memory, configmaps):
    await store.create(configmaps, "default", cm("a"))
    updated = await store.guaranteed_update(configmaps, "default", "a", set_value("w"))
    assert updated["data"] == {"k": "w"}
    with pytest.raises(NotFound):
        await store.guaranteed_update(configmaps, "default", "gone", set_value("w"))


async def test_dry_runs_read_the_store(store, memory, copies, configmaps):
    created = await store.create(configmaps, "default", cm("a"))
    copies.freeze(configmaps.key("default", "a"), created)
    await store.guaranteed_update(configmaps, "default", "a", set_value("2"))
    dry = await store.guaranteed_update(configmaps, "default", "a", set_value("3"), dry_run=True)
    assert dry["data"] == {"k": "3"} and copies.reads == 1  # only the real update asked the copies


async def test_the_cachers_copy_is_the_object_with_its_revision(memory, registry, configmaps):
    cacher = Cacher(memory, registry, capacity=100)
    await cacher.start()
    try:
        store = ObjectStore(memory)
        created = await store.create(configmaps, "default", cm("a"))
        rv = int(created["metadata"]["resourceVersion"])
        assert await cacher.wait_for_revision(rv, timeout=10)
        data, revision = cacher.current(configmaps, configmaps.key("default", "a"))
        assert revision == rv and orjson.loads(data) == created
        assert cacher.current(configmaps, configmaps.key("default", "none")) is None
    finally:
        await cacher.close()
