"""The client library's CPU per watch event: bytes -> event -> object -> store -> handlers.

Every k8py component (scheduler, controllers, kubelet) pays this path for
every object change it watches, on the same cores as the API server, so it
is measured alone here: no server work in the figure.

1. a real API server (its own process) gets ``--pods`` pods of the
   scheduler benchmark's shape, each then bound to a node (what the
   scheduler's pod informer sees: an ADDED, then a MODIFIED with
   ``spec.nodeName`` and the PodScheduled condition); the raw watch body of
   those events is captured once;
2. a *replay server* (this script with ``--replay FILE``, its own process)
   answers the informer's LIST with an empty list at the captured
   resourceVersion and its WATCH with the captured bytes, as fast as the
   socket takes them;
3. a :class:`~k8py.client.shared_informer.SharedIndexInformer` with three
   handlers (the scheduler has one, a controller manager several) syncs and
   consumes them; the CPU this process spends (``time.process_time``) from
   the informer's start to the third handler seeing the last event, divided
   by the events, is the figure. Best of ``--rounds``.

Printed beside it: ``orjson.loads`` of each line alone (the floor of any
JSON client), so the report says how much is the library's own.

    python bench/informer_decode.py [--pods 5000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import orjson

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "src"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

from http_load import HttpConnection  # noqa: E402

NS = "decode"


# -- 1: capture ----------------------------------------------------------------------------

def start_apiserver(data_dir: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "k8py", "apiserver", "--data-dir", data_dir, "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc, _await_line(proc, r"listening on http://(\S+)")


def _await_line(proc: subprocess.Popen, pattern: str) -> str:
    assert proc.stdout is not None
    for line in proc.stdout:
        m = re.search(pattern, line)
        if m:
            threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()  # type: ignore[union-attr]
            return m.group(1)
    raise RuntimeError(f"{proc.args} did not start")


async def _post_all(addr: str, requests: list[tuple[str, bytes]], connections: int = 8) -> None:
    conns = [await HttpConnection.open(addr) for _ in range(connections)]
    it = iter(requests)

    async def worker(conn: HttpConnection) -> None:
        for path, body in it:
            status, reply = await conn.request("POST", path, body)
            if status >= 300:
                raise RuntimeError(f"POST {path}: {status} {reply[:200]!r}")

    await asyncio.gather(*(worker(c) for c in conns))
    for c in conns:
        c.close()


def pod(name: str) -> bytes:
    """The scheduler benchmark's pod (scheduler_perf's template)."""
    return orjson.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
        "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
                                 "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]},
    })


async def capture(addr: str, pods: int) -> tuple[str, bytes]:
    """(resourceVersion before the events, the newline-delimited events)."""
    await _post_all(addr, [("/api/v1/namespaces", orjson.dumps({"metadata": {"name": NS}}))], 1)
    node = {"metadata": {"name": "node-0"}, "status": {"allocatable": {"cpu": "1000", "memory": "4000Gi", "pods": "100000"}}}
    await _post_all(addr, [("/api/v1/nodes", orjson.dumps(node))], 1)
    conn = await HttpConnection.open(addr)
    _, listed = await conn.request("GET", f"/api/v1/namespaces/{NS}/pods?limit=1")
    rv = orjson.loads(listed)["metadata"]["resourceVersion"]
    await _post_all(addr, [(f"/api/v1/namespaces/{NS}/pods", pod(f"p-{i}")) for i in range(pods)])
    binding = {"apiVersion": "v1", "kind": "Binding", "target": {"kind": "Node", "name": "node-0"}}
    await _post_all(addr, [(f"/api/v1/namespaces/{NS}/pods/p-{i}/binding",
                            orjson.dumps({**binding, "metadata": {"name": f"p-{i}"}})) for i in range(pods)])
    conn.writer.write(f"GET /api/v1/namespaces/{NS}/pods?watch=true&resourceVersion={rv} HTTP/1.1\r\n"
                      f"Host: {addr}\r\n\r\n".encode())
    reader = conn.reader
    while (await reader.readline()) not in (b"\r\n", b""):
        pass
    body = bytearray()
    want = 2 * pods
    while body.count(b"\n") < want:
        size = int((await reader.readline()).strip(), 16)
        body += await reader.readexactly(size)
        await reader.readline()
    conn.close()
    return rv, bytes(body)


# -- 2: the replay server (its own process) ---------------------------------------------------

def replay_server(path: str) -> None:
    with open(path, "rb") as f:
        rv, body = f.read().split(b"\n", 1)
    listed = orjson.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": rv.decode()}, "items": []})
    # the body in 32 KiB chunks, as a server flushing a busy watch writes it
    framed = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 32768]), body[i:i + 32768]) for i in range(0, len(body), 32768))

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                target = head.split(b" ", 2)[1]
                if b"watch=true" in target or b"watch=1" in target:
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
                    writer.write(framed)
                    await writer.drain()
                    await asyncio.sleep(3600)  # the watch stays open, as a live one does
                    return
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                             % (len(listed), listed))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        print(f"replaying on 127.0.0.1:{server.sockets[0].getsockname()[1]}", flush=True)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


# -- 3: the informer ------------------------------------------------------------------------------

async def consume(addr: str, events: int) -> float:
    """CPU seconds this process spent from the informer's start to the last event handled thrice."""
    from k8py.client.config import ClientConfig
    from k8py.client.resources import PODS
    from k8py.client.rest import RestClient
    from k8py.client.shared_informer import SharedIndexInformer

    client = RestClient(ClientConfig(server=f"http://{addr}"))
    informer = SharedIndexInformer(client, PODS, namespace=NS, use_watch_list=False)
    done = asyncio.Event()
    seen = [0]

    def third(*objs: object) -> None:
        seen[0] += 1
        if seen[0] == events:
            done.set()

    for _ in range(2):
        informer.add_event_handler(on_add=lambda o: None, on_update=lambda o, n: None)
    informer.add_event_handler(on_add=third, on_update=third)
    gc.collect()  # the garbage of earlier rounds is not this round's cost
    cpu0 = time.process_time()
    task = asyncio.create_task(informer.run(), name="decode-informer")
    try:
        await asyncio.wait_for(done.wait(), 600)
    finally:
        cpu = time.process_time() - cpu0
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        await client.close()
    return cpu


def loads_floor(body: bytes) -> float:
    lines = body.split(b"\n")[:-1]
    cpu0 = time.process_time()
    for line in lines:
        orjson.loads(line)
    return (time.process_time() - cpu0) / len(lines)


async def measure(addr: str, pods: int, rounds: int) -> dict[str, float]:
    """Capture from the API server at ``addr``, replay ``rounds`` times; µs per event."""
    rv, body = await capture(addr, pods)
    events = body.count(b"\n")
    tmp = tempfile.mkdtemp(prefix="k8py-decode-")
    replay = None
    try:
        path = os.path.join(tmp, "watch.ndjson")
        with open(path, "wb") as f:
            f.write(rv.encode() + b"\n" + body)
        replay = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--replay", path],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        replay_addr = _await_line(replay, r"replaying on (\S+)")
        best = min([await consume(replay_addr, events) for _ in range(rounds)])
    finally:
        if replay is not None:
            replay.terminate()
            replay.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)
    return {"events": events, "bytes_per_event": len(body) / events, "us_per_event": best * 1e6 / events,
            "loads_us": loads_floor(body) * 1e6}


def report(r: dict[str, float]) -> str:
    return (f"client CPU per watch event (informer, 3 handlers, {r['events']:,.0f} events of "
            f"{r['bytes_per_event']:,.0f} B): {r['us_per_event']:.1f} µs "
            f"({1e6 / r['us_per_event']:,.0f} events/s a core); orjson.loads alone {r['loads_us']:.1f} µs")


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pods", type=int, default=5000, help="pods created and bound (2 events each)")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    data = tempfile.mkdtemp(prefix="k8py-decode-api-")
    api = None
    try:
        api, addr = start_apiserver(data)
        print(report(await measure(addr, args.pods, args.rounds)), flush=True)
    finally:
        if api is not None:
            api.terminate()
            api.wait(30)
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--replay":
        replay_server(sys.argv[2])
    else:
        asyncio.run(main())
