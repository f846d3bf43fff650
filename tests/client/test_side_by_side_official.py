"""A controller on k8py.client and one on the official client's ``kubernetes.watch.Watch``, side by side.

Both watch the same namespace of the same server from the same resourceVersion
while a writer creates, updates and deletes ConfigMaps. They must end with the
same view, and for every object they must have observed the same sequence
of (event, resourceVersion). (Across objects the order may differ: the
informer's DeltaFIFO batches a key's changes.)
"""

from __future__ import annotations

import asyncio
import contextlib
import threading

import kubernetes

from k8py.client.keys import DeletedFinalStateUnknown
from k8py.client.resources import CONFIGMAPS, NAMESPACES
from k8py.client.shared_informer import SharedIndexInformer
from tests.client.conftest import eventually

NS = "side"
KIND = {"ADDED": "add", "MODIFIED": "update", "DELETED": "delete"}


def _official_controller(api_client, start_rv: str, expected: int, out: list, view: dict, done: threading.Event) -> None:
    core = kubernetes.client.CoreV1Api(api_client)
    watch = kubernetes.watch.Watch()
    seen = 0
    for event in watch.stream(core.list_namespaced_config_map, NS, resource_version=start_rv, timeout_seconds=30):
        raw = event["raw_object"]
        name, rv = raw["metadata"]["name"], raw["metadata"]["resourceVersion"]
        out.append((KIND[event["type"]], name, rv))
        if event["type"] == "DELETED":
            view.pop(name, None)
        else:
            view[name] = rv
        seen += 1
        if seen == expected:
            watch.stop()
    done.set()


async def test_k8py_informer_and_official_watch_agree(client, k8s):
    await client.create(NAMESPACES, {"metadata": {"name": NS}})
    start_rv = (await client.list(CONFIGMAPS, NS))["metadata"]["resourceVersion"]

    informer = SharedIndexInformer(client, CONFIGMAPS, namespace=NS)
    ours: list = []
    informer.add_event_handler(
        on_add=lambda o: ours.append(("add", o["metadata"]["name"], o["metadata"]["resourceVersion"])),
        on_update=lambda old, new: ours.append(("update", new["metadata"]["name"], new["metadata"]["resourceVersion"])),
        on_delete=lambda o: ours.append(("delete", (o.obj if isinstance(o, DeletedFinalStateUnknown) else o)["metadata"]["name"],
                                         (o.obj if isinstance(o, DeletedFinalStateUnknown) else o)["metadata"]["resourceVersion"])),
    )
    expected = 30 + 15 + 10
    theirs: list = []
    their_view: dict = {}
    done = threading.Event()
    thread = threading.Thread(target=_official_controller, args=(k8s, start_rv, expected, theirs, their_view, done), daemon=True)
    thread.start()
    task = asyncio.create_task(informer.run(), name="side-informer")
    try:
        assert await informer.wait_for_cache_sync(timeout=10)
        for i in range(30):
            await client.create(CONFIGMAPS, {"metadata": {"name": f"o{i}", "namespace": NS}, "data": {"v": "0"}})
        for i in range(0, 30, 2):
            await client.patch(CONFIGMAPS, NS, f"o{i}", {"data": {"v": "1"}})
        for i in range(0, 30, 3):
            await client.delete(CONFIGMAPS, NS, f"o{i}")
        await eventually(lambda: len(ours) == expected, timeout=15)
        await asyncio.get_running_loop().run_in_executor(None, done.wait, 20)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    thread.join(5)

    our_view = {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in informer.indexer.list()}
    assert our_view == their_view and len(our_view) == 20

    def per_object(events: list) -> dict:
        grouped: dict = {}
        for kind, name, rv in events:
            grouped.setdefault(name, []).append((kind, rv))
        return grouped

    assert len(theirs) == expected
    assert per_object(ours) == per_object(theirs)
    # with the server's ordering, the official watch's sequence is sorted by resourceVersion
    assert [int(rv) for _, _, rv in theirs] == sorted(int(rv) for _, _, rv in theirs)
