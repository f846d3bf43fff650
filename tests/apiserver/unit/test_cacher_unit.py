"""The Cacher over a store whose watch lags, stalls or breaks on cue
(``tests/support/fake_storage.MemoryStorage``): loading, routing, consistent
reads and progress requests, reloads, a lagged watch, and resources
registered at run time."""

from __future__ import annotations

import asyncio
import dataclasses

import orjson

from k8py.apiserver.handlers.query import parse_query
from k8py.apiserver.registry import Registry
from k8py.apiserver.watch.cacher import Cacher, resource_of_key
from k8py.apiserver.watch.watcher import Watcher
from k8py.storage import CompactedError, StorageError
from tests.support.fake_storage import MemoryStorage
from tests.support.watch_events import obj

TIMEOUT = 10.0  # generous: the machine is shared


async def eventually(check, *, timeout: float = TIMEOUT, what: str = "condition") -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def write_cm(store: MemoryStorage, configmaps, name: str, **data: str) -> int:
    kv = await store.create(configmaps.key("default", name), orjson.dumps(obj(name, data=data)))
    return kv.mod_revision


def names(cacher: Cacher, definition) -> set[str]:
    return {o.name for o in cacher.cache_for(definition).candidates()}


def test_keys_map_to_resources_as_upstream_lays_them_out():
    assert resource_of_key("/registry/pods/default/a") == "pods"
    assert resource_of_key("/registry/namespaces/default") == "namespaces"
    assert resource_of_key("/registry/example.com/widgets/ns/w") == "example.com/widgets"


async def test_start_loads_what_the_store_holds_and_then_follows_its_watch(memory, registry, configmaps, pods):
    await write_cm(memory, configmaps, "before")
    cacher = Cacher(memory, registry)
    await cacher.start()
    try:
        assert names(cacher, configmaps) == {"before"}
        assert cacher.revision == await memory.current_revision()
        rev = await write_cm(memory, configmaps, "after")
        assert await cacher.wait_for_revision(rev, timeout=TIMEOUT)
        assert names(cacher, configmaps) == {"before", "after"}
        assert names(cacher, pods) == set()  # routed by key
        assert memory.watch_calls == [memory.lists[0]]  # watched from the list's revision
    finally:
        await cacher.close()
    assert memory.live_watches == 0


async def test_a_consistent_read_asks_the_store_for_progress_when_the_cache_is_behind(cacher, memory, configmaps):
    assert await cacher.wait_consistent(timeout=TIMEOUT)
    assert memory.progress_requests == 0  # caught up already: no request
    assert cacher.caught_up == 1
    # a write outside /registry/: only a progress notification can tell the cache it has caught up
    await memory.create("/other/x", b"v")
    assert await cacher.wait_consistent(timeout=TIMEOUT)
    assert memory.progress_requests == 1
    assert cacher.revision == await memory.current_revision()


async def test_a_consistent_read_of_a_stalled_watch_times_out_and_is_counted(cacher, memory, configmaps):
    memory.pause_watches()
    rev = await write_cm(memory, configmaps, "stuck")
    assert not await cacher.wait_consistent(timeout=0.2)
    assert cacher.fell_behind == 1
    assert "stuck" not in names(cacher, configmaps)
    memory.resume_watches()
    assert await cacher.wait_for_revision(rev, timeout=TIMEOUT)
    assert "stuck" in names(cacher, configmaps)


async def test_a_failing_progress_request_still_waits_for_the_watch(cacher, memory, configmaps):
    memory.fail_progress = True
    memory.pause_watches()
    await write_cm(memory, configmaps, "late")
    waiting = asyncio.create_task(cacher.wait_consistent(timeout=TIMEOUT), name="test-consistent-read")
    await eventually(lambda: memory.progress_requests == 1, what="the progress request")
    memory.resume_watches()
    assert await waiting
    assert "late" in names(cacher, configmaps)


async def test_a_compacted_watch_reloads_every_cache_and_ends_every_watcher(cacher, memory, configmaps):
    await write_cm(memory, configmaps, "a")
    watcher = Watcher(parse_query(configmaps, "default", {}))
    cacher.cache_for(configmaps).add_watcher(watcher)
    memory.pause_watches()
    missed = await write_cm(memory, configmaps, "written-while-broken")
    memory.break_watches(CompactedError(1, missed))
    memory.resume_watches()
    await eventually(lambda: "written-while-broken" in names(cacher, configmaps), what="the reload")
    assert watcher.terminated  # its client re-watches (410 if its RV is gone)
    assert len(memory.watch_calls) == 2 and memory.watch_calls[1] >= missed
    assert cacher.revision >= missed
    # and the new watch is live
    rev = await write_cm(memory, configmaps, "after-reload")
    assert await cacher.wait_for_revision(rev, timeout=TIMEOUT)
    assert "after-reload" in names(cacher, configmaps)


async def test_a_failed_store_watch_reloads_and_resumes(cacher, memory, configmaps):
    memory.break_watches(StorageError("etcd member went away"))
    await eventually(lambda: len(memory.watch_calls) == 2, what="a new store watch")
    rev = await write_cm(memory, configmaps, "after-failure")
    assert await cacher.wait_for_revision(rev, timeout=TIMEOUT)
    assert "after-failure" in names(cacher, configmaps)


async def test_a_lagged_store_watch_leaves_the_cache_consistent_with_the_store(cacher, memory, configmaps):
    memory.pause_watches()
    for i in range(5):
        await write_cm(memory, configmaps, f"lagging-{i}")
    memory.lag_watches()  # the store drops the watch: everything up to its last revision was delivered
    memory.resume_watches()
    await eventually(lambda: len(memory.watch_calls) >= 2, what="a new store watch")
    current = await memory.current_revision()
    assert await cacher.wait_for_revision(current, timeout=TIMEOUT)
    assert {f"lagging-{i}" for i in range(5)} <= names(cacher, configmaps)
    rev = await write_cm(memory, configmaps, "after-lag")
    assert await cacher.wait_for_revision(rev, timeout=TIMEOUT)
    assert "after-lag" in names(cacher, configmaps)


async def test_a_resource_registered_at_run_time_is_loaded_at_the_cachers_revision(cacher, memory, registry: Registry, configmaps):
    widgets = dataclasses.replace(
        configmaps, group="example.com", kind="Widget", plural="widgets", singular="widget",
        storage_resource="example.com/widgets", openapi_name="",
    )
    await memory.create(widgets.key("default", "w1"), orjson.dumps(obj("w1")))
    assert await cacher.wait_consistent(timeout=TIMEOUT)
    registry.add(widgets)
    await eventually(lambda: names(cacher, widgets) == {"w1"}, what="the new resource's load")
    rev = (await memory.create(widgets.key("default", "w2"), orjson.dumps(obj("w2")))).mod_revision
    assert await cacher.wait_for_revision(rev, timeout=TIMEOUT)
    assert names(cacher, widgets) == {"w1", "w2"}


async def test_closing_ends_every_watcher(memory, registry, configmaps):
    cacher = Cacher(memory, registry)
    await cacher.start()
    watcher = Watcher(parse_query(configmaps, "", {}))
    cacher.cache_for(configmaps).add_watcher(watcher)
    await cacher.close()
    assert watcher.terminated
