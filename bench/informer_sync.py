"""Informer benchmarks: k8py.client beside the official ``kubernetes`` client, same server, same run.

The API server runs as its own process (``python -m k8py apiserver``), so
the two clients, measured one after the other in this process, compete only
with each other's past. Figures:

1. **sync time** for N pods (default 10,000): k8py's SharedIndexInformer
   (streaming list, then watch) from ``run()`` to ``has_synced()``, and the
   official ``kubernetes.informer.SharedInformer`` from ``start()`` to a full
   cache;
2. **events/s** with 3 handlers: both replay the same M modifications (default
   10,000) from one resourceVersion. k8py's informer is synced through a
   TCP proxy that is then blocked while the writes happen and unblocked, so it
   resumes its watch from its last resourceVersion; the official informer
   starts with its resume resourceVersion set to the same point. Timed from
   the first to the last modification seen by the third handler;
3. **memory per cached object** (tracemalloc, a separate pass because tracing
   slows everything): traced bytes held after sync / N, for k8py as is, k8py
   with the ``drop_managed_fields`` transform, and the official informer
   (which keeps ``V1Pod`` models).

A client that does not finish within ``--timeout`` seconds (default 600) is
reported as FAILED with how far it got, never as a rate, and the script then
exits with status 1.

    python bench/informer_sync.py [--pods 10000] [--events 10000] [--timeout 600]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc

import kubernetes
import orjson

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

from http_load import pod_body  # noqa: E402

from k8py.client.backoff import Backoff  # noqa: E402
from k8py.client.config import ClientConfig  # noqa: E402
from k8py.client.resources import NAMESPACES, PODS  # noqa: E402
from k8py.client.rest import PatchType, RestClient  # noqa: E402
from k8py.client.shared_informer import SharedIndexInformer, drop_managed_fields  # noqa: E402
from tests.client.fault_proxy import FaultProxy  # noqa: E402

NS = "bench"
#: how long one client may take for one figure before it counts as failed (set by --timeout)
TIMEOUT = 600.0


class TimedOut(Exception):
    """A client did not finish a figure in time: a failure, not a slow rate."""

    def __init__(self, what: str, done: int, total: int) -> None:
        super().__init__(f"{what}: timed out after {TIMEOUT:g}s with {done:,} of {total:,}")


def start_server(data_dir: str, cache: int) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "k8py", "apiserver", "--data-dir", data_dir, "--port", "0",
         "--watch-cache-size", str(cache), "--watch-bookmark-interval", "60"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        m = re.search(r"listening on (http://\S+)", line)
        if m:
            threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()  # type: ignore[union-attr]
            return proc, m.group(1)
    raise RuntimeError("API server did not start")


async def populate(client: RestClient, pods: int) -> None:
    await client.create(NAMESPACES, {"metadata": {"name": NS}})
    queue = list(range(pods))

    async def worker() -> None:
        while queue:
            i = queue.pop()
            await client.create(PODS, orjson.loads(pod_body(f"pod-{i:05d}", NS)), namespace=NS)

    await asyncio.gather(*(worker() for _ in range(16)))


async def modify(client: RestClient, pods: int, events: int) -> None:
    queue = list(range(events))

    async def worker() -> None:
        while queue:
            i = queue.pop()
            await client.patch(PODS, NS, f"pod-{i % pods:05d}", {"metadata": {"labels": {"round": str(i // pods + 1)}}},
                               patch_type=PatchType.MERGE)

    await asyncio.gather(*(worker() for _ in range(16)))


def official_api(url: str) -> kubernetes.client.CoreV1Api:
    config = kubernetes.client.Configuration()
    config.host = url
    return kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(config))


# -- 1 and 3: sync (and memory) ----------------------------------------------------------


async def k8py_sync(url: str, pods: int, *, transform=None, use_watch_list=None) -> tuple[float, SharedIndexInformer, RestClient]:
    client = RestClient(ClientConfig(server=url))
    informer = SharedIndexInformer(client, PODS, namespace=NS, transform=transform, use_watch_list=use_watch_list)
    counter = [0]
    for _ in range(3):
        informer.add_event_handler(on_add=lambda o: counter.__setitem__(0, counter[0] + 1))
    started = time.perf_counter()
    task = asyncio.create_task(informer.run(), name="bench-informer")
    try:
        async with asyncio.timeout(TIMEOUT):
            await informer.wait_for_cache_sync()
            await informer.wait_idle()
    except TimeoutError:
        task.cancel()
        raise TimedOut("k8py sync", len(informer.indexer), pods) from None
    elapsed = time.perf_counter() - started
    assert len(informer.indexer) == pods, len(informer.indexer)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    return elapsed, informer, client


def official_sync(url: str, pods: int) -> tuple[float, object]:
    api = official_api(url)
    informer = kubernetes.informer.SharedInformer(api.list_namespaced_pod, namespace=NS)
    counter = [0]
    for _ in range(3):
        informer.add_event_handler(kubernetes.informer.ADDED, lambda o: counter.__setitem__(0, counter[0] + 1))
    started = time.perf_counter()
    informer.start()
    deadline = time.monotonic() + TIMEOUT
    while counter[0] < 3 * pods:
        if time.monotonic() > deadline:
            informer._stop_event.set()
            raise TimedOut("official sync", counter[0] // 3, pods)
        time.sleep(0.005)
    elapsed = time.perf_counter() - started
    informer._stop_event.set()  # stop() would wait for the watch to time out
    return elapsed, informer


async def memory_per_object(url: str, pods: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for label, transform in (("k8py", None), ("k8py+drop_managed_fields", drop_managed_fields)):
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        _, informer, client = await k8py_sync(url, pods, transform=transform)
        await client.close()
        gc.collect()
        out[label] = (tracemalloc.get_traced_memory()[0] - before) / pods
        tracemalloc.stop()
        del informer
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    _, official = await asyncio.get_running_loop().run_in_executor(None, official_sync, url, pods)
    gc.collect()
    out["official"] = (tracemalloc.get_traced_memory()[0] - before) / pods
    tracemalloc.stop()
    del official
    return out


# -- 2: events/s ----------------------------------------------------------------------------


async def k8py_events(url: str, writer: RestClient, pods: int, events: int) -> tuple[float, str]:
    async with FaultProxy(url) as proxy:
        client = RestClient(ClientConfig(server=proxy.url))
        informer = SharedIndexInformer(client, PODS, namespace=NS, backoff=Backoff(initial=0.01, cap=0.05))
        seen = [0, 0.0, 0.0]

        def third(old, new) -> None:
            if seen[0] == 0:
                seen[1] = time.perf_counter()
            seen[0] += 1
            seen[2] = time.perf_counter()

        informer.add_event_handler(on_update=lambda old, new: None)
        informer.add_event_handler(on_update=lambda old, new: None)
        informer.add_event_handler(on_update=third)
        task = asyncio.create_task(informer.run(), name="bench-informer-events")
        await informer.wait_for_cache_sync()
        start_rv = informer.last_sync_resource_version
        proxy.block()
        await modify(writer, pods, events)
        proxy.unblock()
        deadline = time.monotonic() + TIMEOUT
        while seen[0] < events:
            if time.monotonic() > deadline:
                task.cancel()
                raise TimedOut("k8py events", seen[0], events)
            await asyncio.sleep(0.005)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        await client.close()
        return events / (seen[2] - seen[1]), start_rv


def official_events(url: str, start_rv: str, events: int) -> float:
    api = official_api(url)
    informer = kubernetes.informer.SharedInformer(api.list_namespaced_pod, namespace=NS)
    informer._resource_version = start_rv  # resume from the same point (its own reconnect path)
    seen = [0, 0.0, 0.0]

    def third(obj) -> None:
        if seen[0] == 0:
            seen[1] = time.perf_counter()
        seen[0] += 1
        seen[2] = time.perf_counter()

    informer.add_event_handler(kubernetes.informer.MODIFIED, lambda o: None)
    informer.add_event_handler(kubernetes.informer.MODIFIED, lambda o: None)
    informer.add_event_handler(kubernetes.informer.MODIFIED, third)
    informer.start()
    deadline = time.monotonic() + TIMEOUT
    while seen[0] < events:
        if time.monotonic() > deadline:
            informer._stop_event.set()
            raise TimedOut("official events", seen[0], events)
        time.sleep(0.005)
    informer._stop_event.set()
    return events / (seen[2] - seen[1])


async def main() -> None:
    global TIMEOUT
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--timeout", type=float, default=TIMEOUT, help="seconds one client may take for one figure")
    args = parser.parse_args()
    TIMEOUT = args.timeout
    failed = False
    with tempfile.TemporaryDirectory() as data_dir:
        proc, url = start_server(data_dir, cache=args.events + args.pods + 1000)
        try:
            writer = RestClient(ClientConfig(server=url))
            t0 = time.perf_counter()
            await populate(writer, args.pods)
            print(f"populated {args.pods} pods in {time.perf_counter() - t0:.1f}s")

            try:
                ours, _, client = await k8py_sync(url, args.pods)
                await client.close()
                theirs, _ = await asyncio.get_running_loop().run_in_executor(None, official_sync, url, args.pods)
                paged, _, client = await k8py_sync(url, args.pods, use_watch_list=False)
                await client.close()
                print(f"sync {args.pods} pods:   k8py {ours:.2f}s (streaming list), {paged:.2f}s (paged list)   "
                      f"official {theirs:.2f}s   (official/k8py {theirs / ours:.1f}x)")
            except TimedOut as err:
                failed = True
                print(f"sync {args.pods} pods:   FAILED: {err}")

            try:
                our_rate, start_rv = await k8py_events(url, writer, args.pods, args.events)
                their_rate = await asyncio.get_running_loop().run_in_executor(None, official_events, url, start_rv, args.events)
                print(f"events/s, 3 handlers: k8py {our_rate:,.0f}   official {their_rate:,.0f}   (k8py/official {our_rate / their_rate:.1f}x)")
            except TimedOut as err:
                failed = True
                print(f"events/s, 3 handlers: FAILED: {err}")

            memory = await memory_per_object(url, args.pods)
            print("memory per cached pod (tracemalloc): " + "   ".join(f"{k} {v / 1024:.1f} KiB" for k, v in memory.items())
                  + f"   (k8py/official {memory['k8py'] / memory['official']:.2f})")
            await writer.close()
        finally:
            # the official informer threads cannot be stopped promptly; keep them quiet once the server is gone
            logging.getLogger("kubernetes").setLevel(logging.CRITICAL)
            proc.terminate()
            proc.wait(30)
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    asyncio.run(main())
