"""Chaos: an informer through a connection-cutting proxy, a tiny server history, thousands of writes.

The informer watches a live k8py API server through :class:`FaultProxy`,
which cuts its connections at random and now and then refuses connections
long enough for the server's small watch history (``watch_cache_capacity``)
to roll past the informer's resourceVersion, forcing 410 Expired and
relists. Meanwhile writers create, update and delete 1,000 ConfigMaps
directly (the whole workload, however long a loaded machine takes), then
keep patching the survivors until the informer has been cut ten times and
has relisted (however quickly a fast machine got through the workload). A
partition lasts until the writers have written more than the history holds,
so it forces a relist however slowly a loaded machine writes. At the end:

- the informer's cache equals the server's state exactly (names, resource
  versions and data);
- every handler saw each object's changes in resourceVersion order, and
  replaying what a handler saw gives the server's state too, including the
  handler with a tiny buffer that had to coalesce.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time

import pytest

from k8py.client.backoff import Backoff
from k8py.client.config import ClientConfig
from k8py.client.keys import DeletedFinalStateUnknown, object_key
from k8py.client.resources import CONFIGMAPS
from k8py.client.rest import RestClient, RetryPolicy
from k8py.client.shared_informer import SharedIndexInformer
from tests.client.fault_proxy import FaultProxy
from tests.support.servers import ServerThread, sqlite_storage

OBJECTS = 1000
WRITERS = 8
NAMESPACE = "default"


class OrderedRecorder:
    """A handler that checks per-key resourceVersion order and replays into a view."""

    def __init__(self, *, slow: bool = False) -> None:
        self.view: dict[str, tuple[int, dict]] = {}
        self.last_rv: dict[str, int] = {}
        self.violations: list[str] = []
        self.events = 0
        self.slow = slow

    def _see(self, key: str, rv: int, *, strictly: bool) -> None:
        last = self.last_rv.get(key, 0)
        if rv < last or (strictly and rv == last):
            self.violations.append(f"{key}: rv {rv} after {last}")
        self.last_rv[key] = max(last, rv)
        self.events += 1

    async def on_add(self, obj) -> None:
        self._see(object_key(obj), int(obj["metadata"]["resourceVersion"]), strictly=True)
        self.view[object_key(obj)] = (int(obj["metadata"]["resourceVersion"]), obj.get("data") or {})
        if self.slow and self.events % 50 == 0:
            await asyncio.sleep(0.005)

    def on_update(self, old, new) -> None:
        if int(old["metadata"]["resourceVersion"]) > int(new["metadata"]["resourceVersion"]):
            self.violations.append(f"{object_key(new)}: update goes backwards")
        self._see(object_key(new), int(new["metadata"]["resourceVersion"]), strictly=True)
        self.view[object_key(new)] = (int(new["metadata"]["resourceVersion"]), new.get("data") or {})

    def on_delete(self, obj) -> None:
        last = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        key = object_key(obj)
        if last is not None:
            self._see(key, int(last["metadata"]["resourceVersion"]), strictly=False)
        if key not in self.view:
            self.violations.append(f"{key}: delete of an object never added")
        self.view.pop(key, None)


class Progress:
    """The writes made so far, counted by every writer (the partitions wait on it)."""

    def __init__(self) -> None:
        self.writes = 0


async def _writer(client: RestClient, index: int, rng: random.Random, progress: Progress) -> int:
    writes = 0
    for i in range(index, OBJECTS, WRITERS):
        name = f"cm-{i:05d}"
        await client.create(CONFIGMAPS, {"metadata": {"name": name, "namespace": NAMESPACE}, "data": {"v": "0"}})
        writes += 1
        progress.writes += 1
        for v in range(rng.randint(0, 2)):
            await client.patch(CONFIGMAPS, NAMESPACE, name, {"data": {"v": str(v + 1)}})
            writes += 1
            progress.writes += 1
        if rng.random() < 0.3:
            await client.delete(CONFIGMAPS, NAMESPACE, name)
            writes += 1
            progress.writes += 1
    return writes


async def _keep_writing_until_cut(client: RestClient, proxy: FaultProxy, informer: SharedIndexInformer, cuts: int,
                                  progress: Progress) -> int:
    """Patch the surviving objects until the proxy has cut ``cuts`` informer connections and the informer relisted.

    On a fast machine the fixed workload can finish before the chaos has cut
    the informer often; this keeps the informer under writes and cuts until it
    has been, so every run tests the same amount of chaos. (A partition in
    progress ends only after enough writes: these are what end it.)"""
    names = [o["metadata"]["name"] for o in (await client.list(CONFIGMAPS, NAMESPACE))["items"]]
    writes = 0
    while (proxy.cuts < cuts or informer.reflector.relist_count < 1) and names:
        await client.patch(CONFIGMAPS, NAMESPACE, names[writes % len(names)], {"data": {"tail": str(writes)}})
        writes += 1
        progress.writes += 1
    return writes


async def _partitions(proxy: FaultProxy, rng: random.Random, progress: Progress, history: int) -> None:
    """Every so often refuse connections until the history has rolled past the informer.

    A partition ends once more writes than the server's history holds were
    made while it lasted (and not before a short random time), so the
    informer's resourceVersion is too old when it comes back: 410 Expired and
    a relist, on a fast machine or a loaded one alike."""
    while True:
        await asyncio.sleep(rng.uniform(0.8, 1.6))
        proxy.block()
        start = progress.writes
        await asyncio.sleep(rng.uniform(0.3, 0.6))
        while progress.writes - start <= history + history // 2:
            await asyncio.sleep(0.02)
        proxy.unblock()


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.parametrize("use_watch_list", [True, False], ids=["streaming-list", "list-then-watch"])
async def test_informer_cache_converges_under_cut_connections_and_compaction(tmp_path, use_watch_list):
    rng = random.Random(4)
    history = 100
    progress = Progress()
    with ServerThread(sqlite_storage(str(tmp_path / "data")), watch_cache_capacity=history, bookmark_interval=0.5) as server:
        async with RestClient(ClientConfig(server=server.url)) as writer_client, FaultProxy(server.url, seed=7) as proxy:
            informer_client = RestClient(ClientConfig(server=proxy.url), retry=RetryPolicy(max_attempts=3, initial=0.02, cap=0.1))
            informer = SharedIndexInformer(informer_client, CONFIGMAPS, namespace=NAMESPACE, use_watch_list=use_watch_list,
                                           backoff=Backoff(initial=0.05, cap=0.5), page_size=100)
            fast, slow = OrderedRecorder(), OrderedRecorder(slow=True)
            informer.add_event_handler(handler=fast)
            informer.add_event_handler(handler=slow, buffer_size=64)
            tasks = [asyncio.create_task(informer.run(), name="chaos-informer")]
            try:
                assert await informer.wait_for_cache_sync(timeout=10)
                tasks.append(asyncio.create_task(proxy.chaos(mean_interval=0.25), name="chaos-cuts"))
                tasks.append(asyncio.create_task(_partitions(proxy, rng, progress, history), name="chaos-partitions"))
                writes = sum(await asyncio.gather(*(_writer(writer_client, w, random.Random(w), progress) for w in range(WRITERS))))
                writes += await _keep_writing_until_cut(writer_client, proxy, informer, cuts=10, progress=progress)
                for task in tasks[1:]:
                    task.cancel()
                proxy.unblock()

                listed = await writer_client.list(CONFIGMAPS, NAMESPACE)
                server_state = {object_key(o): (int(o["metadata"]["resourceVersion"]), o.get("data") or {}) for o in listed["items"]}
                list_rv = int(listed["metadata"]["resourceVersion"])

                def cache_state() -> dict:
                    return {object_key(o): (int(o["metadata"]["resourceVersion"]), o.get("data") or {}) for o in informer.indexer.list()}

                deadline = time.monotonic() + 30
                while (cache_state() != server_state or int(informer.last_sync_resource_version or 0) < list_rv) and time.monotonic() < deadline:
                    await asyncio.sleep(0.1)
                await asyncio.wait_for(informer.wait_idle(), 30)
                reflector = informer.reflector
                print(f"\nchaos ({'streaming list' if use_watch_list else 'list+watch'}): {writes} writes, {len(server_state)} objects left, relists={reflector.relist_count} "
                      f"expired={reflector.expired_count} watches={reflector.watch_count} cuts={proxy.cuts} "
                      f"coalesced(slow)={informer._listeners[1].coalesced}")
                assert cache_state() == server_state
                for recorder in (fast, slow):
                    assert recorder.violations == []
                    assert recorder.view == server_state
                assert reflector.relist_count >= 1 and proxy.cuts >= 10
            finally:
                for task in tasks:
                    task.cancel()
                for task in tasks:
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
                await informer_client.close()
