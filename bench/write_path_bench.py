"""The API server's write path: CPU per request, by verb (issues 9 and 10).

One API server (``python -m k8py apiserver``, its own process, the embedded
store) and this process as the load: 16 keep-alive connections of raw asyncio
HTTP/1.1 (cheap, so the server is what is measured). Each phase runs N
requests and reads the server's user + system CPU from ``/proc`` before and
after, so the figure is the server's CPU per request whatever else runs on the
machine (wall-clock rates are printed beside it, and those do depend on load):

1. pod creates (``POST pods``, the scheduler bench's pod shape: what a ReplicaSet
   controller or the scheduler bench creates);
2. binds (``POST pods/NAME/binding``, what the scheduler writes);
3. status patches (``PATCH pods/NAME/status``, a strategic-merge patch of
   the phase and conditions, what a kubelet writes);
4. status updates (``PUT pods/NAME/status`` of the object last read);

5. lease creates and renewals (``POST``, then ``PUT leases/NAME`` of the
   lease as its last write returned it, with a new ``renewTime``: what every
   kubelet writes every 10 s, 500 a second at 5,000 nodes);

and, for scale, two floors: ``get`` (a pod read from the watch cache) and
``version`` (``GET /version``: aiohttp and the middlewares alone).

    python bench/write_path_bench.py [--pods 3000] [--phases create,bind,patch,update] [--apiserver-arg=--foo ...]
    python bench/write_path_bench.py --baseline-src /work/main/src     # beside another tree, interleaved

``--watchers 0,2,10`` runs the phases once per count with that many watches
open on each server for the whole run, as a cluster's informers hold them
(every pod, all namespaces, ``allowWatchBookmarks``: the controller manager's
and the scheduler's pod informers; ``--baseline-watchers`` gives the baseline
another count), plus ``--kubelets`` node-pinned watches
(``spec.nodeName=node-i``, none of them concerned by the writes); a chunk's
CPU is read once every watcher has had every event, so the figure is the
write plus its fan-out. The extra CPU per create over the 0-watcher runs,
divided by the count, is what one watcher costs per event (a count may
repeat, ``0,10,0,10``: the figures are then means).

``--pid-file FILE`` writes the server's pid (for ``py-spy record --pid``).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from typing import Callable

import orjson

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_load import HttpConnection, WatchReader, pod_body  # noqa: E402

CONNECTIONS = 16
NS = "default"


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds (user, system) by thread name: the event loop apart from the store's writer thread."""
    out: dict[str, list[float]] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                head, rest = f.read().rsplit(")", 1)
        except OSError:
            continue
        name = "loop" if tid == str(pid) else "other threads"
        fields = rest.split()
        acc = out.setdefault(name, [0.0, 0.0])
        acc[0] += int(fields[11]) / tick
        acc[1] += int(fields[12]) / tick
    return {k: (v[0], v[1]) for k, v in out.items()}  # type: ignore[misc]


def pod(name: str, shape: str = "small") -> bytes:
    """The pod POSTed: "small" (the scheduler bench's) or "rs" (controllers_bench's template, http_load.pod_body)."""
    if shape == "rs":
        return pod_body(name, NS)
    return orjson.dumps({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"app": "bench"}},
        "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
                                 "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]},
    })


def binding(name: str) -> bytes:
    return orjson.dumps({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                         "target": {"kind": "Node", "name": "node-0"}})


STATUS_PATCH = orjson.dumps({"status": {
    "phase": "Running", "podIP": "10.0.0.1", "startTime": "2026-01-01T00:00:00Z",
    "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                   {"type": "ContainersReady", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    "containerStatuses": [{"name": "pause", "ready": True, "restartCount": 0, "image": "registry.k8s.io/pause:3.10",
                           "imageID": "sha256:0", "started": True,
                           "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}],
}})


async def run_all(addr: str, method: str, requests: list[tuple[str, bytes]], content_type: str = "application/json",
                  expect: Callable[[int], bool] = lambda s: s < 300) -> tuple[float, list[bytes]]:
    conns = [await HttpConnection.open(addr) for _ in range(CONNECTIONS)]
    it = iter(requests)
    failures: list[bytes] = []
    replies: list[bytes] = []

    async def worker(conn: HttpConnection) -> None:
        for path, body in it:
            status, reply = await request(conn, method, path, body, content_type)
            if not expect(status):
                failures.append(reply[:300])
            replies.append(reply)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in conns))
    elapsed = time.perf_counter() - t0
    for c in conns:
        c.close()
    if failures:
        raise RuntimeError(f"{len(failures)} {method}s failed, first: {failures[0]!r}")
    return elapsed, replies


async def request(conn: HttpConnection, method: str, path: str, body: bytes, content_type: str) -> tuple[int, bytes]:
    if content_type == "application/json":
        return await conn.request(method, path, body)
    # HttpConnection always says application/json: a patch needs its own type
    head = (f"{method} {path} HTTP/1.1\r\nHost: {conn.host}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    conn.writer.write(head + body)
    status = int((await conn.reader.readline()).split()[1])
    length = 0
    while (line := await conn.reader.readline()) not in (b"\r\n", b""):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return status, await conn.reader.readexactly(length) if length else b""


#: the server under cProfile timed by its main thread's CPU clock (wall time on a
#: loaded machine charges the calls it was preempted in)
_PROFILED = """
import cProfile, sys, time
from k8py.cli.main import main
out, sys.argv = sys.argv[1], ["k8py", *sys.argv[2:]]
prof = cProfile.Profile(time.thread_time)
prof.enable()
try:
    main()
finally:
    prof.disable()
    prof.dump_stats(out)
"""


def start_server(data: str, extra: list[str], profile: str = "", src: str = "") -> tuple[subprocess.Popen, str]:
    prefix = ["-c", _PROFILED, profile] if profile else ["-m", "k8py"]
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = os.path.abspath(src)
    proc = subprocess.Popen(env=env, args=[sys.executable, *prefix, "apiserver", "--data-dir", data, "--port", "0", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        m = re.search(r"listening on http://([\d.]+:\d+)", line)
        if m:
            threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()  # type: ignore[union-attr]
            return proc, m.group(1)
    raise RuntimeError("the API server did not start")


def plan_for(phase: str, pods: list[str], shape: str) -> tuple[str, str, list[tuple[str, bytes]], str]:
    base = f"/api/v1/namespaces/{NS}/pods"
    if phase == "create":
        return "create", "POST", [(base, pod(p, shape)) for p in pods], "application/json"
    if phase == "bind":
        return "bind", "POST", [(f"{base}/{p}/binding", binding(p)) for p in pods], "application/json"
    if phase == "patch":
        return ("status patch", "PATCH", [(f"{base}/{p}/status", STATUS_PATCH) for p in pods],
                "application/strategic-merge-patch+json")
    if phase == "update":
        return "status update", "PUT", [], "application/json"
    if phase == "lease-create":
        return "lease create", "POST", [(LEASES, lease(p)) for p in pods], "application/json"
    if phase == "lease-renew":
        return "lease renew", "PUT", [], "application/json"
    if phase == "get":  # the read floor: one pod from the watch cache, every middleware on the way
        return "get", "GET", [(f"{base}/{p}", b"") for p in pods], "application/json"
    if phase == "version":  # the HTTP floor: aiohttp and the middlewares around a constant answer
        return "version", "GET", [("/version", b"") for _ in pods], "application/json"
    raise SystemExit(f"unknown phase {phase!r}: create, bind, patch, update, lease-create, lease-renew, get or version")


LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"


def lease(name: str) -> bytes:
    return orjson.dumps({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name},
                         "spec": {"holderIdentity": name, "leaseDurationSeconds": 40,
                                  "renewTime": "2026-01-01T00:00:00.000000Z"}})


#: server address -> lease name -> the lease as its last write returned it (a kubelet keeps its lease so)
LEASES_WRITTEN: dict[str, dict[str, dict]] = {}
_RENEWALS = itertools.count(1)


async def lease_renewals(addr: str, names: list[str]) -> list[tuple[str, bytes]]:
    """PUT bodies: each lease as last written, renewed (a kubelet's renewal: no read first)."""
    out = []
    for name in names:
        obj = LEASES_WRITTEN[addr][name]
        renewals = next(_RENEWALS)  # a new renewTime each time (the same one would be a no-op update)
        obj["spec"]["renewTime"] = f"2026-01-01T{renewals // 3600 % 24:02d}:{renewals // 60 % 60:02d}:{renewals % 60:02d}.000000Z"
        out.append((f"{LEASES}/{name}", orjson.dumps(obj)))
    return out


async def status_updates(addr: str, pods: list[str]) -> list[tuple[str, bytes]]:
    """PUT bodies: each pod as read now, with one more condition."""
    base = f"/api/v1/namespaces/{NS}/pods"
    _, replies = await run_all(addr, "GET", [(f"{base}/{p}", b"") for p in pods])
    out = []
    for r in replies:
        obj = orjson.loads(r)
        obj["status"].setdefault("conditions", []).append({"type": "bench.k8py.io/Updated", "status": "True"})
        out.append((f"{base}/{obj['metadata']['name']}/status", orjson.dumps(obj)))
    return out


class Watches:
    """The watches a run holds open on one server: ``count`` informers of
    every pod and ``kubelets`` node-pinned ones, each counting the event lines
    it reads."""

    def __init__(self, addr: str, count: int, kubelets: int) -> None:
        self.addr = addr
        self.paths = ["/api/v1/pods?watch=true&allowWatchBookmarks=true&resourceVersion={rv}"] * count
        self.paths += [f"/api/v1/pods?watch=true&allowWatchBookmarks=true&resourceVersion={{rv}}"
                       f"&fieldSelector=spec.nodeName%3Dnode-{i + 1}" for i in range(kubelets)]
        self.count = count
        self.readers: list[WatchReader] = []

    async def open(self) -> None:
        conn = await HttpConnection.open(self.addr)
        _, body = await conn.request("GET", f"/api/v1/namespaces/{NS}/pods?limit=1")
        conn.close()
        rv = orjson.loads(body)["metadata"]["resourceVersion"]
        for path in self.paths:
            reader = WatchReader()
            await reader.start(self.addr, path.format(rv=rv))
            self.readers.append(reader)

    def delivered(self) -> int:
        return sum(r.count for r in self.readers[: self.count])

    async def wait_for(self, total: int, timeout: float = 120.0) -> None:
        """Until the all-pod watchers have read ``total`` events between them."""
        deadline = time.perf_counter() + timeout
        while self.delivered() < total:
            if time.perf_counter() > deadline:
                raise RuntimeError(f"watchers read {self.delivered()} of {total} events in {timeout:.0f} s")
            await asyncio.sleep(0.005)

    def close(self) -> None:
        for r in self.readers:
            r.close()


async def run_phase(phase: str, pods: list[str], servers: list[tuple[str, subprocess.Popen, str]],
                    shapes: dict[str, str], watches: dict[str, Watches], chunk: int, threads: bool) -> dict[str, float]:
    """One phase over ``pods`` on every server, interleaved in chunks; the
    CPU of a chunk is read once its events have reached every watcher.
    Returns the CPU µs per request by server."""
    n = len(pods)
    plans = {name: plan_for(phase, pods, shapes[name]) for name, _, _ in servers}
    label, method, _, ctype = plans["this tree"]
    cpu = {name: 0.0 for name, _, _ in servers}
    threads0 = thread_cpu(servers[0][1].pid)
    wall = {name: 0.0 for name, _, _ in servers}
    for lo in range(0, n, chunk):
        for name, proc, addr in servers:
            requests = plans[name][2]
            reads = lease_renewals if phase == "lease-renew" else status_updates
            part = requests[lo:lo + chunk] if requests else await reads(addr, pods[lo:lo + chunk])
            w = watches[name]
            pod_writes = method in ("POST", "PUT", "PATCH") and not phase.startswith("lease")
            target = w.delivered() + len(part) * w.count if pod_writes else 0
            c0 = cpu_seconds(proc.pid)
            t0 = time.perf_counter()
            _, replies = await run_all(addr, method, part, ctype)
            await w.wait_for(target)
            wall[name] += time.perf_counter() - t0
            cpu[name] += cpu_seconds(proc.pid) - c0
            if phase.startswith("lease"):
                for reply in replies:
                    obj = orjson.loads(reply)
                    LEASES_WRITTEN.setdefault(addr, {})[obj["metadata"]["name"]] = obj
    line = f"  {label:>13}: " + "; ".join(
        f"{name} {cpu[name] * 1e6 / n:5.0f} µs CPU/request ({n / wall[name]:,.0f}/s wall)" for name, _, _ in servers)
    if len(servers) > 1:
        line += f"; ratio {cpu['this tree'] / max(cpu['baseline'], 1e-9):.2f}"
    print(line, flush=True)
    if threads:
        threads1 = thread_cpu(servers[0][1].pid)
        parts = []
        for tname, (u1, s1) in sorted(threads1.items()):
            u0, s0 = threads0.get(tname, (0.0, 0.0))
            if (u1 - u0) + (s1 - s0) > 0:
                parts.append(f"{tname} {(u1 - u0) * 1e6 / n:.0f}+{(s1 - s0) * 1e6 / n:.0f}")
        print(f"  {'':>13}  by thread (user+system µs/request): {', '.join(parts)}", flush=True)
    return {name: cpu[name] * 1e6 / n for name, _, _ in servers}


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", type=int, default=3000)
    ap.add_argument("--phases", default="version,create,bind,patch,update")
    ap.add_argument("--apiserver-arg", action="append", default=[])
    ap.add_argument("--pid-file", default="")
    ap.add_argument("--profile", default="", help="run the server under cProfile, its stats written to this file")
    ap.add_argument("--baseline-src", default="",
                    help="a k8py source tree (e.g. another worktree's src) to run beside this one, the phases "
                         "interleaved in chunks so both see the same load: CPU figures as ratios")
    ap.add_argument("--threads", action="store_true", help="also print this tree's CPU per request by thread (user/system)")
    ap.add_argument("--chunk", type=int, default=250, help="requests per turn when interleaving with a baseline")
    ap.add_argument("--shape", choices=("small", "rs"), default="small",
                    help="the pod created: the scheduler bench's (small) or controllers_bench's template (rs)")
    ap.add_argument("--watchers", default="0",
                    help="pod watches (all namespaces, bookmarks, as an informer opens them) open on each server "
                         "during the phases: the watch fan-out's share of a write; a comma-separated list runs the "
                         "phases once per count (e.g. 0,2,10; a count may repeat: means)")
    ap.add_argument("--kubelets", type=int, default=0, help="node-pinned pod watches open beside them (none concerned)")
    ap.add_argument("--baseline-shape", choices=("small", "rs"), help="the baseline's pod shape (default: --shape)")
    ap.add_argument("--baseline-watchers", type=int, help="the baseline's pod watches in every run (default: --watchers)")
    args = ap.parse_args()
    shapes = {"this tree": args.shape, "baseline": args.baseline_shape or args.shape}
    counts = [int(c) for c in args.watchers.split(",")]
    n = args.pods
    servers: list[tuple[str, subprocess.Popen, str]] = []
    dirs: list[str] = []
    try:
        sources = [("this tree", "")] + ([("baseline", args.baseline_src)] if args.baseline_src else [])
        for label, src in sources:
            data = tempfile.mkdtemp(prefix="k8py-write-bench-")
            dirs.append(data)
            proc, addr = start_server(data, args.apiserver_arg, args.profile if not src else "", src)
            servers.append((label, proc, addr))
        if args.pid_file:
            with open(args.pid_file, "w") as f:
                f.write(str(servers[0][1].pid))
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-0"},
                "status": {"allocatable": {"cpu": "1000", "memory": "1000Gi", "pods": "100000"}}}
        for _, _, addr in servers:
            await run_all(addr, "POST", [("/api/v1/nodes", orjson.dumps(node))])
            # warm up: the first requests of each kind import and build what later ones reuse
            await run_all(addr, "POST", [(f"/api/v1/namespaces/{NS}/pods", pod(f"warm-{i}")) for i in range(200)])
        print(f"write path: {n} requests per phase, {CONNECTIONS} connections, {os.cpu_count()} cpus "
              f"(the load generator shares them; CPU is the API server's own); "
              + "; ".join(f"{label}: pods {shapes[label]}" for label, _, _ in servers), flush=True)
        chunk = args.chunk if len(servers) > 1 else n
        per_create: dict[tuple[str, int], list[float]] = {}
        for run, count in enumerate(counts):
            pods = [f"p{run}-{i}" for i in range(n)]
            own = {name: count if name == "this tree" or args.baseline_watchers is None else args.baseline_watchers
                   for name, _, _ in servers}
            watches = {name: Watches(addr, own[name], args.kubelets) for name, _, addr in servers}
            for w in watches.values():
                await w.open()
            if len(counts) > 1 or count or args.kubelets:
                print(" with " + "; ".join(f"{name}: {own[name]} pod watches" for name, _, _ in servers)
                      + (f" and {args.kubelets} node-pinned ones" if args.kubelets else "") + ":", flush=True)
            try:
                for phase in args.phases.split(","):
                    figures = await run_phase(phase, pods, servers, shapes, watches, chunk, args.threads)
                    if phase == "create":
                        for name, _, _ in servers:
                            per_create.setdefault((name, own[name]), []).append(figures[name])
            finally:
                for w in watches.values():
                    w.close()
            await asyncio.sleep(0.2)  # the streams end on the server before the next run starts
        for name, _, _ in servers:
            mean = {c: sum(v) / len(v) for (nm, c), v in sorted(per_create.items()) if nm == name}
            if 0 in mean and len(mean) > 1:
                parts = [f"{c}: {(mean[c] - mean[0]) / c:5.1f}" for c in mean if c]
                print(f"  {name}: µs per event per watcher over the 0-watcher runs {'; '.join(parts)}; "
                      f"CPU µs per create " + ", ".join(f"{c}: {m:.0f}" for c, m in mean.items()), flush=True)
    finally:
        for _, proc, _ in servers:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        for data in dirs:
            shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
