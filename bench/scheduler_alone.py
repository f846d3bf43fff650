"""The scheduler process alone: its CPU per pod and its own ceiling, with a canned API server.

``scheduler_bench.py`` measures the scheduler beside a real API server, whose
CPU (and a loaded machine) dominate the figures. Here the scheduler (``python
-m k8py scheduler``, the real process) talks to a *canned* API server (this
script with ``--serve``, its own process) that does the least an API server
can: its watches stream pre-encoded objects (5,000 nodes, 1,000 placed pods,
then the pods to schedule), a binding is answered at once and its MODIFIED
event (``spec.nodeName``, PodScheduled) pushed to the pod watch, Events are
accepted and dropped. So the figures are the scheduler's alone:

- **scheduler CPU per pod** (``/proc``), from the first pending pod sent to
  the last binding received;
- **pods/s** over the same window: the scheduler's ceiling when the API
  server costs nothing.

    python bench/scheduler_alone.py [--nodes 5000] [--placed 1000] [--pods 10000] [--profile DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import sys
import tempfile
import time

import orjson

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from component_processes import cpu_seconds, start, start_profilers, stop, stop_profilers  # noqa: E402
from scheduler_workloads import node_obj, pod_obj  # noqa: E402

_OK = b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201}'


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _event(kind: str, obj: dict) -> bytes:
    return orjson.dumps({"type": kind, "object": obj}) + b"\n"


def _end(rv: int) -> bytes:
    return _event("BOOKMARK", {"kind": "Pod", "apiVersion": "v1", "metadata": {
        "resourceVersion": str(rv), "annotations": {"k8s.io/initial-events-end": "true"}}})


class CannedServer:
    def __init__(self, nodes: int, placed: int, pods: int) -> None:
        self.rv = 10
        self.nodes = [self._stamp(node_obj(i)) for i in range(nodes)]
        self.placed = [self._stamp(pod_obj(f"init-{i}", "sched-setup", node=f"node-{i % nodes}")) for i in range(placed)]
        self.pending = [self._stamp(pod_obj(f"p-{i}", "sched-test")) for i in range(pods)]
        self.by_name = {p["metadata"]["name"]: p for p in self.pending}
        self.namespaces = [self._stamp({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}})
                           for n in ("default", "sched-setup", "sched-test")]
        self.pod_watchers: list[asyncio.StreamWriter] = []
        self.bound = 0
        self.started = self.finished = 0.0

    def _stamp(self, obj: dict) -> dict:
        self.rv += 1
        meta = obj["metadata"]
        meta.update(resourceVersion=str(self.rv), uid=f"uid-{self.rv}", creationTimestamp="2026-12-01T00:00:00Z")
        return obj

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                method, target = head.split(b" ", 2)[:2]
                m = re.search(rb"\r\ncontent-length: *(\d+)", head, re.I)
                body = await reader.readexactly(int(m.group(1))) if m else b""
                if b"watch=true" in target:
                    await self._watch(target, writer)
                    return
                if target.startswith(b"/bench/start"):
                    self.started = time.perf_counter()
                    self._push(b"".join(_event("ADDED", p) for p in self.pending))
                    reply = b"{}"
                elif target.startswith(b"/bench/done"):
                    reply = orjson.dumps({"bound": self.bound, "started": self.started, "finished": self.finished})
                elif method == b"POST" and target.endswith(b"/binding"):
                    reply = self._bind(target, body)
                else:
                    reply = _OK
                writer.write(b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                             % (len(reply), reply))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass

    async def _watch(self, target: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        objs = self.nodes if b"/nodes" in target else self.namespaces if b"/namespaces?" in target else self.placed
        writer.write(_chunk(b"".join(_event("ADDED", o) for o in objs) + _end(self.rv)))
        if b"/pods" in target:
            self.pod_watchers.append(writer)
        await asyncio.sleep(3600)

    def _push(self, data: bytes) -> None:
        for w in self.pod_watchers:
            w.write(_chunk(data))

    def _bind(self, target: bytes, body: bytes) -> bytes:
        name = target.rsplit(b"/", 2)[-2].decode()
        node = orjson.loads(body)["target"]["name"]
        pod = self.by_name[name]
        self.rv += 1
        bound = {**pod, "metadata": {**pod["metadata"], "resourceVersion": str(self.rv)},
                 "spec": {**pod["spec"], "nodeName": node},
                 "status": {"conditions": [{"type": "PodScheduled", "status": "True"}]}}
        self._push(_event("MODIFIED", bound))
        self.bound += 1
        if self.bound == len(self.pending):
            self.finished = time.perf_counter()
        return _OK


def serve(nodes: int, placed: int, pods: int) -> None:
    async def main() -> None:
        canned = CannedServer(nodes, placed, pods)
        server = await asyncio.start_server(canned.handle, "127.0.0.1", 0)
        print(f"canned API server on 127.0.0.1:{server.sockets[0].getsockname()[1]}", flush=True)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


async def _get(addr: str, path: str) -> bytes:
    host, port = addr.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n".encode())
    head = await reader.readuntil(b"\r\n\r\n")
    m = re.search(rb"content-length: *(\d+)", head, re.I)
    body = await reader.readexactly(int(m.group(1))) if m else b""
    writer.close()
    return head.split(b" ", 2)[1] + b" " + body


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument("--placed", type=int, default=1000)
    p.add_argument("--pods", type=int, default=10000)
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--profile", metavar="DIR", help="py-spy the scheduler while measured into DIR/alone-scheduler.raw")
    args = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="k8py-sched-alone-")
    api = sched = None
    try:
        api, addr = start([sys.executable, os.path.abspath(__file__), "--serve", str(args.nodes), str(args.placed), str(args.pods)],
                           r"canned API server on (\S+)")
        kubeconfig = os.path.join(tmp, "kubeconfig")
        with open(kubeconfig, "w") as f:
            f.write(f"apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: 'http://{addr}'}}}}]\n"
                    "users: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n")
        sched, sched_url = start([sys.executable, "-m", "k8py", "scheduler", "--kubeconfig", kubeconfig], r"on (http://\S+)")
        sched_addr = sched_url.split("//", 1)[1]
        while not (await _get(sched_addr, "/readyz")).startswith(b"200"):
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)  # the cache takes the placed pods in
        spies = start_profilers(args.profile, "alone", {"scheduler": sched.pid})
        cpu0 = cpu_seconds(sched.pid)
        await _get(addr, "/bench/start")
        deadline = time.monotonic() + args.timeout
        while True:
            state = orjson.loads((await _get(addr, "/bench/done")).split(b" ", 1)[1])
            if state["finished"] or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        cpu = cpu_seconds(sched.pid) - cpu0
        stop_profilers(spies)
        if not state["finished"]:
            raise SystemExit(f"timed out: {state['bound']}/{args.pods} bound")
        wall = state["finished"] - state["started"]
        print(f"scheduler alone ({args.nodes} nodes, {args.placed} placed, {args.pods} pods, canned API server): "
              f"{args.pods / wall:,.0f} pods/s; scheduler CPU {cpu * 1000 / args.pods:.2f} ms/pod "
              f"({cpu:.1f}s in {wall:.1f}s); machine load average {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        for proc in (sched, api):
            stop(proc)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--serve":
        serve(*map(int, sys.argv[2:]))
    else:
        asyncio.run(main())
