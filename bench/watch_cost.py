"""What one watch event costs the API server, per watcher (issues 9, 10, 13).

The API server runs in its own process; this process opens N watch
connections and writes pods, then reads the server's CPU time (utime + stime
from ``/proc/<pid>/stat``) from the first write to the last event delivered.
The same writes with no watcher give the cost of the writes themselves (store,
cache, HTTP of the create), so

    CPU per event per watcher = (cpu(N watchers) - cpu(0 watchers)) / (events × N)

is what the fan-out adds: selecting, queueing, encoding and writing each event
to each watcher. Three shapes, as the cluster's own watchers look:

``namespace``  N watchers of every pod in the namespace written to (the
               controller manager, the scheduler, informers): each event goes
               to all N;
``node``       N kubelet-style watchers, ``fieldSelector=spec.nodeName=node-i``,
               while the pods written are bound to node-0: each event concerns
               one watcher, so its cost must not grow with N;
``name``       N watchers of one Node each (``fieldSelector=metadata.name=n-i``,
               what kube-proxy and a kubelet's node informer ask), while Nodes
               n-0, n-1, ... are created: at most one watcher per event.

For ``node`` and ``name`` the figure printed is the extra CPU per *event*
(all N watchers together), which should stay flat as N grows.

    python bench/watch_cost.py [--watchers 1,10,100,1000] [--events 1000] [--shapes namespace,node,name]

The readers share the machine with the server (they count event lines and
nothing more); the figures are CPU time of the server process, so they hold
under load better than wall-clock rates, but a loaded machine still inflates
them (caches, frequency): say so when reporting.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import orjson

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from apiserver_bench import start_server  # noqa: E402
from http_load import HttpConnection, WatchReader, pod_body  # noqa: E402

_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def _bound_pod(name: str, namespace: str) -> bytes:
    body = orjson.loads(pod_body(name, namespace))
    body["spec"]["nodeName"] = "node-0"
    return orjson.dumps(body)


async def _write(addr: str, events: int, request) -> None:
    writers = [await HttpConnection.open(addr) for _ in range(16)]

    async def writer(w: HttpConnection, idx: range) -> None:
        for i in idx:
            status, body = await w.request(*request(i))
            assert status in (200, 201), (status, body[:300])

    try:
        await asyncio.gather(*(writer(w, range(k, events, 16)) for k, w in enumerate(writers)))
    finally:
        for w in writers:
            w.close()


async def measure(pid: int, addr: str, shape: str, watchers: int, events: int, run: int) -> float:
    """Server CPU seconds for ``events`` writes of ``shape`` with ``watchers`` watchers."""
    c = await HttpConnection.open(addr)
    ns = f"{shape}-{watchers}-{run}"
    await c.request("POST", "/api/v1/namespaces", orjson.dumps({"metadata": {"name": ns}}))
    status, body = await c.request("GET", f"/api/v1/namespaces/{ns}/pods?limit=1")
    rv = orjson.loads(body)["metadata"]["resourceVersion"]
    if shape == "namespace":
        paths = [f"/api/v1/namespaces/{ns}/pods?watch=true&resourceVersion={rv}"] * watchers
        expect = watchers * events
    elif shape == "node":
        paths = [f"/api/v1/pods?watch=true&resourceVersion={rv}&fieldSelector=spec.nodeName%3Dnode-{i}" for i in range(watchers)]
        expect = events if watchers else 0
    else:
        paths = [f"/api/v1/nodes?watch=true&resourceVersion={rv}&fieldSelector=metadata.name%3D{ns}-n-{i}" for i in range(watchers)]
        expect = min(events, watchers)
    readers = [WatchReader() for _ in paths]
    for r, p in zip(readers, paths):
        await r.start(addr, p)
    # every watch registered before the first write: a watcher count the server reports would be
    # better, but a generous pause is enough for connections already established on loopback
    await asyncio.sleep(0.5 + watchers / 500)

    if shape == "name":
        def request(i: int):
            return "POST", "/api/v1/nodes", orjson.dumps({"metadata": {"name": f"{ns}-n-{i}", "labels": {"bench": ns}}})
    elif shape == "node":
        def request(i: int):
            return "POST", f"/api/v1/namespaces/{ns}/pods", _bound_pod(f"w-{i}", ns)
    else:
        def request(i: int):
            return "POST", f"/api/v1/namespaces/{ns}/pods", pod_body(f"w-{i}", ns)

    before = cpu_seconds(pid)
    await _write(addr, events, request)
    deadline = time.perf_counter() + 300
    while sum(r.count for r in readers) < expect and time.perf_counter() < deadline:
        await asyncio.sleep(0.01)
    spent = cpu_seconds(pid) - before
    delivered = sum(r.count for r in readers)
    for r in readers:
        r.close()
    c.close()
    assert delivered >= expect, f"{shape}: delivered {delivered} of {expect}"
    return spent


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--watchers", default="1,10,100,1000")
    ap.add_argument("--events", type=int, default=1000)
    ap.add_argument("--shapes", default="namespace,node,name")
    ap.add_argument("--repeat", type=int, default=2, help="runs per figure; the lowest is kept")
    ap.add_argument("--py-spy", metavar="FILE", help="record the server with py-spy into FILE (collapsed stacks)")
    args = ap.parse_args()
    counts = [int(x) for x in args.watchers.split(",")]
    tmp = tempfile.mkdtemp(prefix="k8py-watch-cost-")
    proc, addr, _ = start_server(os.path.join(tmp, "api"))
    spy = None
    if args.py_spy:
        spy = subprocess.Popen(["py-spy", "record", "-p", str(proc.pid), "-o", args.py_spy, "-f", "raw", "-r", "200"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for shape in args.shapes.split(","):
            base = min([await measure(proc.pid, addr, shape, 0, args.events, k) for k in range(args.repeat)])
            print(f"{shape:9s}    0 watchers: {base / args.events * 1e6:8.0f} µs server CPU per write (the writes alone)", flush=True)
            for n in counts:
                spent = min([await measure(proc.pid, addr, shape, n, args.events, k) for k in range(args.repeat)])
                extra = max(spent - base, 0.0)
                if shape == "namespace":
                    print(f"{shape:9s} {n:4d} watchers: {extra / (args.events * n) * 1e6:8.1f} µs per event per watcher"
                          f"   ({spent / args.events * 1e6:.0f} µs per write in all)", flush=True)
                else:
                    print(f"{shape:9s} {n:4d} watchers: {extra / args.events * 1e6:8.1f} µs per event for all {n} watchers"
                          f"   (one watcher or none concerned; {spent / args.events * 1e6:.0f} µs per write in all)", flush=True)
    finally:
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(60)
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
