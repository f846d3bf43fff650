"""``k8py up`` benchmarks (issue 13), each beside the published figure it is measured against.

1. Cold start, from running the command (``python -m k8py up --port 0`` on a
   fresh data directory) to: the API server's ``/readyz`` answering, the
   node Ready, and a first pod (nginx, POSTed the moment the node is Ready)
   Running. Against kind's published 12–17 s and kubeadm's 24–28 s; targets
   API < 1 s, node < 2 s, pod < 2.5 s. It polls every 10 ms on one kept-alive
   connection (before 2026-12-02 each poll was a new TLS connection, a
   handshake for the API server a hundred times a second: those figures are
   a little slower for it).
2. Idle memory of the whole cluster: the PSS (``/proc/PID/smaps_rollup``)
   of the supervisor, every component and every container, 10 s after ready
   with one nginx pod. Against k3s's published 512 MB–1.6 GB; target < 200 MB.
3. The pytest fixture's set-up: ``k8py.testing.Cluster().start()`` until it
   returns a ready cluster (and its stop).
4. With ``--simulated-nodes N [--pods M]``: time until all N simulated nodes
   are Ready, M pods (one Deployment) Running, and all of them deleted, with
   memory per node and per pod — against kwok's CI budgets (5,000 nodes Ready
   < 60 s, 10,000 pods Running < 60 s, deleted < 90 s): ``up_scale.py``.

    python bench/up_bench.py [--runs 3] [--simulated-nodes 1000 --pods 10000]
    python bench/up_bench.py --runs 0 --simulated-nodes 5000 --pods 10000   # the scale run alone

The machine's load is printed, and how long a fixed piece of Python work takes
(``cluster_probe.reference_speed``) at the start and at the end: these machines'
speed varies by half or more from hour to hour, CPU per request with it, and two
runs' figures are comparable when their reference figures are.
Beside each cold-start figure is the CPU the cluster's processes had used by
then (all of them, user and system): a figure the machine's load barely
moves, against which a change can be judged when the wall clock cannot;
the idle PSS is also printed by process.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from cluster_probe import admin_context, get, pss_mb, reference_speed, until  # noqa: E402
from up_scale import simulated  # noqa: E402

from k8py.cluster.state import read_state  # noqa: E402
from k8py.cluster.sweep import processes_of  # noqa: E402
from k8py.testing import Cluster  # noqa: E402

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "first"},
       "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}


class Connection:
    """One kept-alive HTTPS connection to the API server for the cold start's polls
    (every 10 ms): a new connection per poll made the API server do a TLS handshake
    a hundred times a second while the cluster started, CPU the cluster's own start
    then did not have. Any failure drops the connection (the next poll makes one)."""

    def __init__(self, api: str, ctx: Any) -> None:
        import urllib.parse

        url = urllib.parse.urlsplit(api)
        self.host, self.port, self.ctx = url.hostname or "127.0.0.1", url.port or 443, ctx
        self._conn: Any = None

    def request(self, method: str, path: str, body: Any = None) -> Any:
        import http.client

        try:
            if self._conn is None:
                self._conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=60)
            data = json.dumps(body).encode() if body is not None else None
            self._conn.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
            response = self._conn.getresponse()
            raw = response.read()
            if response.status == 409 and method == "POST":
                return {"exists": True}  # (a create whose answer a dropped connection lost)
            if response.status >= 300:
                return None
            return json.loads(raw) if raw[:1] == b"{" else raw.decode()
        except (OSError, http.client.HTTPException, ValueError):
            self.close()
            return None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def ready_nodes(api: str, ctx: Any, conn: "Connection | None" = None) -> int:
    nodes = (conn.request("GET", "/api/v1/nodes") if conn is not None else get(f"{api}/api/v1/nodes", ctx)) or {}
    return sum(1 for n in nodes.get("items", []) for c in n.get("status", {}).get("conditions", [])
               if c["type"] == "Ready" and c["status"] == "True")


def cold_start(extra: list[str]) -> dict[str, float]:
    data = tempfile.mkdtemp(prefix="k8py-bench-")
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "k8py", "up", "--data-dir", data, "--port", "0", *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out: dict[str, float] = {}
    try:
        api = until(lambda: (read_state(data) or {}).get("api"))
        ctx = until(lambda: admin_context(data))
        conn = Connection(api, ctx)
        until(lambda: conn.request("GET", "/readyz") == "ok")
        out["api"], out["api_cpu"] = time.perf_counter() - t0, tree_cpu(proc.pid)
        until(lambda: ready_nodes(api, ctx, conn) >= 1)
        out["node"], out["node_cpu"] = time.perf_counter() - t0, tree_cpu(proc.pid)
        until(lambda: conn.request("POST", "/api/v1/namespaces/default/pods", POD))
        until(lambda: (conn.request("GET", "/api/v1/namespaces/default/pods/first") or {}).get("status", {}).get("phase") == "Running")
        out["pod"], out["pod_cpu"] = time.perf_counter() - t0, tree_cpu(proc.pid)
        conn.close()
        until(lambda: (read_state(data) or {}).get("ready"))
        time.sleep(10)
        pids = [proc.pid, *processes_of(data)]
        out["pss_mb"] = pss_mb(pids)
        out["processes"] = len(pids)
        for pid in pids:  # by process name (k8py-apiserver, k8py-zygote, python for k8py up itself and nginx, ...)
            name = f"pss:{_comm(pid)}"
            out[name] = out.get(name, 0.0) + pss_mb([pid])
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        shutil.rmtree(data, ignore_errors=True)
    return out


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return "?"


def tree_cpu(root: int) -> float:
    """CPU seconds (user + system) used so far by ``root`` and every live process below it:
    on a shared machine the wall-clock figures are upper bounds, these are what the cluster
    itself spent (a process that already exited is not counted)."""
    tick = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(entry)] = int(fields[1])
        cpu[int(entry)] = (int(fields[11]) + int(fields[12])) / tick
    total = 0.0
    for pid, used in cpu.items():
        seen, p = 0, pid
        while p not in (0, 1, root) and seen < 64:
            p, seen = parent.get(p, 0), seen + 1
        if p == root:
            total += used
    return total


def fixture_setup() -> tuple[float, float]:
    t0 = time.perf_counter()
    cluster = Cluster().start()
    started = time.perf_counter() - t0
    t1 = time.perf_counter()
    cluster.stop()
    return started, time.perf_counter() - t1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--simulated-nodes", type=int, default=0)
    parser.add_argument("--pods", type=int, default=0)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
          f"reference work: {reference_speed():.0f} ms (cluster_probe.reference_speed: lower is a faster machine)")
    if args.runs:
        start_up(args.runs)
    if args.simulated_nodes:
        simulated(args.simulated_nodes, args.pods)
    print(f"load average after: {os.getloadavg()[0]:.1f}; reference work: {reference_speed():.0f} ms")


def start_up(n: int) -> None:
    runs = [cold_start([]) for _ in range(n)]
    median = lambda key: sorted(r.get(key, 0.0) for r in runs)[len(runs) // 2]  # noqa: E731
    for key, label, target in (("api", "API ready", 1.0), ("node", "node Ready", 2.0), ("pod", "first pod Running", 2.5)):
        values = sorted(r[key] for r in runs)
        print(f"cold start -> {label}: median {values[len(values) // 2]:.2f} s (min {values[0]:.2f}, max {values[-1]:.2f}); "
              f"target < {target} s; kind 12-17 s, kubeadm 24-28 s (published); "
              f"CPU the cluster had used by then: median {median(key + '_cpu'):.2f} s")
    mem = sorted(r["pss_mb"] for r in runs)
    print(f"idle cluster PSS (one nginx pod, {runs[0]['processes']:.0f} processes): median {mem[len(mem) // 2]:.0f} MB; "
          f"target < 200 MB; k3s 512 MB-1.6 GB (published)")
    names = sorted({k for r in runs for k in r if k.startswith("pss:")}, key=lambda k: -median(k))
    print("  PSS by process (median, MB): " + ", ".join(f"{k[4:]} {median(k):.1f}" for k in names))
    setups = [fixture_setup() for _ in range(n)]
    starts = sorted(s for s, _ in setups)
    print(f"pytest fixture set-up (k8py.testing.Cluster().start()): median {starts[len(starts) // 2]:.2f} s; "
          f"stop median {sorted(s for _, s in setups)[len(setups) // 2]:.2f} s")


if __name__ == "__main__":
    main()
