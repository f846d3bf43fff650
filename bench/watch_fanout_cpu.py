"""The watch fan-out's own CPU, per event per watcher, measured precisely.

``watch_cost.py`` measures the whole API server process, where the cost of
each write (HTTP, admission, the store) is ~1.5 ms and drowns what one watcher
adds at small N. This one isolates the fan-out: the API server runs on its
own event loop in a thread of this process (``tests.support.servers``); the
objects are written straight into its store from that loop (no HTTP request,
so the loop's own share of a write is small, and the store's writer runs on
its own thread); the watch clients read in a child process. The CPU time of
the server's loop thread (``time.thread_time``) from the first write to the
last event read, minus the same writes with no watcher, divided by
``events × N``, is what each watcher costs per event: the cacher's decode of
the event is in the baseline, the selection, queueing, encoding and socket
writes for each watcher are not.

Shapes as in ``watch_cost.py``: ``namespace`` (every watcher gets every
event), ``node`` (``spec.nodeName=node-i`` watchers, pods bound to node-0)
and ``name`` (``metadata.name=n-i`` watchers of Nodes, the Nodes n-0, n-1,
... created). For the last two the figure is µs per event for all N.

    python bench/watch_fanout_cpu.py [--watchers 1,10,100,1000] [--events 2000] [--shapes namespace,node,name] [--concurrency 16]
                                     [--through storage|object-store]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time

import orjson

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
sys.path.insert(0, os.path.dirname(_HERE))

_MARK = b'{"type":"'


# -- the reader child: N watches, counts event lines ---------------------------

async def _read(addr: str, paths: list[str], expect: int) -> None:
    host, port = addr.rsplit(":", 1)
    counts = [0] * len(paths)
    done = asyncio.Event()

    async def one(i: int, path: str, opened: asyncio.Future) -> None:
        reader, writer = await asyncio.open_connection(host, int(port), limit=2**24)
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n".encode())
        await reader.readuntil(b"\r\n\r\n")
        opened.set_result(None)
        tail = b""
        while True:
            data = await reader.read(1 << 20)
            if not data:
                return
            buf = tail + data
            counts[i] += buf.count(_MARK)
            tail = buf[-(len(_MARK) - 1):]
            if sum(counts) >= expect:
                done.set()

    opened = [asyncio.get_running_loop().create_future() for _ in paths]
    tasks = [asyncio.create_task(one(i, p, f)) for i, (p, f) in enumerate(zip(paths, opened))]
    await asyncio.gather(*opened)
    print("ready", flush=True)
    if expect:
        await asyncio.wait_for(done.wait(), 600)
    print(f"done {sum(counts)}", flush=True)
    for t in tasks:
        t.cancel()


# -- the measuring side --------------------------------------------------------

def _pod(name: str, ns: str, node: str) -> bytes:
    from http_load import pod_body

    body = orjson.loads(pod_body(name, ns))
    body["metadata"].update(uid=f"uid-{ns}-{name}", creationTimestamp="2026-01-01T00:00:00Z")
    if node:
        body["spec"]["nodeName"] = node
    return orjson.dumps(body)


#: how the objects are written: straight into the store, or through the API
#: server's object store (defaults, validation, and whatever the object store
#: hands the watch cache of its writes), still without HTTP
THROUGH = "storage"


async def _write_all(server, items: list[tuple[str, bytes]], concurrency: int = 16) -> None:
    """Writes from the server's loop, ``concurrency`` at a time (the store batches them)."""
    it = iter(items)
    storage = server.storage
    definitions = {d.storage_key_resource: d for d in server.registry if d.group == "" and d.converter is None}

    async def worker() -> None:
        for key, value in it:
            if THROUGH == "storage":
                await storage.create(key, value)
                continue
            obj = orjson.loads(value)
            meta = obj["metadata"]
            definition = definitions[key.split("/")[2]]
            await server.store.create(definition, meta.get("namespace", ""), obj)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


def measure(server, shape: str, watchers: int, events: int, run: int, concurrency: int = 16) -> float:
    """The server loop thread's CPU seconds for ``events`` writes with ``watchers`` watchers."""
    ns = f"{shape}-{watchers}-{run}"
    addr = server.url.removeprefix("http://")
    if shape == "namespace":
        paths = [f"/api/v1/namespaces/{ns}/pods?watch=true&resourceVersion=0"] * watchers
        items = [(f"/registry/pods/{ns}/p-{i}", _pod(f"p-{i}", ns, "")) for i in range(events)]
        expect = watchers * events
    elif shape == "node":
        paths = [f"/api/v1/pods?watch=true&resourceVersion=0&fieldSelector=spec.nodeName%3D{ns}-node-{i}" for i in range(watchers)]
        items = [(f"/registry/pods/{ns}/p-{i}", _pod(f"p-{i}", ns, f"{ns}-node-0")) for i in range(events)]
        expect = events if watchers else 0
    else:
        paths = [f"/api/v1/nodes?watch=true&resourceVersion=0&fieldSelector=metadata.name%3D{ns}-n-{i}" for i in range(watchers)]
        items = [(f"/registry/nodes/{ns}-n-{i}", orjson.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": f"{ns}-n-{i}", "uid": f"u-{ns}-{i}", "labels": {"bench": ns}}})) for i in range(events)]
        expect = min(events, watchers)
    reader = subprocess.Popen([sys.executable, __file__, "--read", addr, str(expect)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert reader.stdin is not None and reader.stdout is not None
    reader.stdin.write("\n".join(paths) + "\n\n")
    reader.stdin.flush()
    assert reader.stdout.readline().strip() == "ready"
    time.sleep(0.2 + watchers / 1000)  # every watch past its (empty) initial list
    before = server.call(_thread_time())
    server.call(_write_all(server.server, items, concurrency), timeout=600)
    line = reader.stdout.readline().strip()
    spent = server.call(_thread_time()) - before
    reader.wait(60)
    assert line.startswith("done") and int(line.split()[1]) >= expect, line
    return spent


async def _thread_time() -> float:
    return time.thread_time()


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--read":
        paths = []
        for line in sys.stdin:
            if not line.strip():
                break
            paths.append(line.strip())
        asyncio.run(_read(sys.argv[2], paths, int(sys.argv[3])))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--watchers", default="1,10,100,1000")
    ap.add_argument("--events", type=int, default=2000)
    ap.add_argument("--shapes", default="namespace,node,name")
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure; the lowest is kept")
    ap.add_argument("--concurrency", type=int, default=16,
                    help="writes in flight (the store batches them): 1 gives one event per store batch, as a quiet "
                         "cluster's writes come, where each watcher's write of each batch is the cost")
    ap.add_argument("--through", choices=("storage", "object-store"), default="storage",
                    help="write straight into the store (the fan-out alone), or through the API server's object store "
                         "(what its own writes hand the watch cache is then in the figures)")
    args = ap.parse_args()
    global THROUGH
    THROUGH = args.through
    from tests.support.servers import ServerThread, sqlite_storage

    tmp = tempfile.mkdtemp(prefix="k8py-fanout-cpu-")
    server = ServerThread(sqlite_storage(tmp)).start()
    try:
        for shape in args.shapes.split(","):
            base = min(measure(server, shape, 0, args.events, k, args.concurrency) for k in range(args.repeat))
            print(f"{shape:9s}    0 watchers: {base / args.events * 1e6:7.1f} µs loop CPU per write (decode into the cache)", flush=True)
            for n in (int(x) for x in args.watchers.split(",")):
                spent = min(measure(server, shape, n, args.events, 10 + k, args.concurrency) for k in range(args.repeat))
                extra = max(spent - base, 0.0)
                if shape == "namespace":
                    print(f"{shape:9s} {n:4d} watchers: {extra / (args.events * n) * 1e6:7.2f} µs per event per watcher", flush=True)
                else:
                    print(f"{shape:9s} {n:4d} watchers: {extra / args.events * 1e6:7.2f} µs per event, all {n} watchers together", flush=True)
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
