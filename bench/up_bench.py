"""``k8py up`` benchmarks (issue 13), each beside the published figure it is measured against.

1. Cold start, from running the command (``python -m k8py up --port 0`` on a
   fresh data directory) to: the API server's ``/readyz`` answering, the
   node Ready, and a first pod (nginx, POSTed the moment the node is Ready)
   Running. Against kind's published 12–17 s and kubeadm's 24–28 s; targets
   API < 1 s, node < 2 s, pod < 2.5 s.
2. Idle memory of the whole cluster: the PSS (``/proc/PID/smaps_rollup``)
   of the supervisor, every component and every container, 10 s after ready
   with one nginx pod. Against k3s's published 512 MB–1.6 GB; target < 200 MB.
3. The pytest fixture's set-up: ``k8py.testing.Cluster().start()`` until it
   returns a ready cluster (and its stop).
4. With ``--simulated-nodes N [--pods M]``: time until all N simulated nodes
   are Ready, M pods (one Deployment) Running, and all of them deleted, with
   memory per node and per pod — against kwok's CI budgets (5,000 nodes Ready
   < 60 s, 10,000 pods Running < 60 s, deleted < 90 s).

    python bench/up_bench.py [--runs 3] [--simulated-nodes 1000 --pods 10000]

The machine's load is printed: on a shared machine the figures are upper bounds.
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
import urllib.request
from typing import Any, Callable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from k8py.cluster.state import read_state  # noqa: E402
from k8py.cluster.sweep import processes_of  # noqa: E402
from k8py.testing import Cluster  # noqa: E402

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "first"},
       "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}


def get(url: str) -> Any:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            body = r.read()
            return json.loads(body) if body[:1] == b"{" else body.decode()
    except OSError:
        return None


def post(url: str, body: Any) -> Any:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def until(check: Callable[[], Any], timeout: float = 300, every: float = 0.01) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError("benchmark step timed out")
        time.sleep(every)


def ready_nodes(api: str) -> int:
    nodes = get(f"{api}/api/v1/nodes?limit=0") or {}
    return sum(1 for n in nodes.get("items", []) for c in n.get("status", {}).get("conditions", [])
               if c["type"] == "Ready" and c["status"] == "True")


def pss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("Pss:"))
        except (OSError, StopIteration):
            pass
    return total / 1024


def cold_start(extra: list[str]) -> dict[str, float]:
    data = tempfile.mkdtemp(prefix="k8py-bench-")
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "k8py", "up", "--data-dir", data, "--port", "0", *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out: dict[str, float] = {}
    try:
        api = until(lambda: (read_state(data) or {}).get("api"))
        until(lambda: get(f"{api}/readyz") == "ok")
        out["api"] = time.perf_counter() - t0
        until(lambda: ready_nodes(api) >= 1)
        out["node"] = time.perf_counter() - t0
        until(lambda: _try_post(f"{api}/api/v1/namespaces/default/pods", POD))
        until(lambda: (get(f"{api}/api/v1/namespaces/default/pods/first") or {}).get("status", {}).get("phase") == "Running")
        out["pod"] = time.perf_counter() - t0
        until(lambda: (read_state(data) or {}).get("ready"))
        time.sleep(10)
        pids = [proc.pid, *processes_of(data)]
        out["pss_mb"] = pss_mb(pids)
        out["processes"] = len(pids)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        shutil.rmtree(data, ignore_errors=True)
    return out


def _try_post(url: str, body: Any) -> bool:
    try:
        post(url, body)
        return True
    except OSError:
        return False


def fixture_setup() -> tuple[float, float]:
    t0 = time.perf_counter()
    cluster = Cluster().start()
    started = time.perf_counter() - t0
    t1 = time.perf_counter()
    cluster.stop()
    return started, time.perf_counter() - t1


def simulated(nodes: int, pods: int) -> None:
    data = tempfile.mkdtemp(prefix="k8py-bench-sim-")
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "k8py", "up", "--data-dir", data, "--port", "0", "--nodes", "0",
                             "--simulated-nodes", str(nodes), "--no-proxy", "--no-dns", "--timeout", "600"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        api = until(lambda: (read_state(data) or {}).get("api"), timeout=600)
        until(lambda: ready_nodes(api) >= nodes, timeout=600, every=0.5)
        t_nodes = time.perf_counter() - t0
        mem_nodes = pss_mb([proc.pid, *processes_of(data)])
        print(f"  {nodes} simulated nodes Ready: {t_nodes:.1f} s from the command (kwok budget for 5,000: < 60 s); "
              f"cluster PSS {mem_nodes:.0f} MB")
        if pods:
            kc = os.path.join(data, "kubeconfig")
            t1 = time.perf_counter()
            subprocess.run(["kubectl", "--kubeconfig", kc, "create", "deployment", "many", "--image=nginx", f"--replicas={pods}"],
                           check=True, capture_output=True)

            def running() -> bool:
                listed = get(f"{api}/api/v1/namespaces/default/pods?fieldSelector=status.phase%3DRunning&limit=0") or {}
                return len(listed.get("items", [])) >= pods

            until(running, timeout=900, every=1.0)
            t_run = time.perf_counter() - t1
            mem_pods = pss_mb([proc.pid, *processes_of(data)])
            t2 = time.perf_counter()
            subprocess.run(["kubectl", "--kubeconfig", kc, "delete", "deployment", "many", "--wait=false"], check=True, capture_output=True)
            until(lambda: not (get(f"{api}/api/v1/namespaces/default/pods?limit=1") or {"items": [1]}).get("items"), timeout=900, every=1.0)
            t_del = time.perf_counter() - t2
            print(f"  {pods} pods Running: {t_run:.1f} s (kwok: 10,000 < 60 s); deleted: {t_del:.1f} s (kwok: < 90 s)")
            print(f"  memory: {mem_nodes / nodes * 1024:.0f} KB per node, {(mem_pods - mem_nodes) / pods * 1024:.1f} KB per pod (PSS)")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
        shutil.rmtree(data, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--simulated-nodes", type=int, default=0)
    parser.add_argument("--pods", type=int, default=0)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    runs = [cold_start([]) for _ in range(args.runs)]
    for key, label, target in (("api", "API ready", 1.0), ("node", "node Ready", 2.0), ("pod", "first pod Running", 2.5)):
        values = sorted(r[key] for r in runs)
        print(f"cold start -> {label}: median {values[len(values) // 2]:.2f} s (min {values[0]:.2f}, max {values[-1]:.2f}); "
              f"target < {target} s; kind 12-17 s, kubeadm 24-28 s (published)")
    mem = sorted(r["pss_mb"] for r in runs)
    print(f"idle cluster PSS (one nginx pod, {runs[0]['processes']:.0f} processes): median {mem[len(mem) // 2]:.0f} MB; "
          f"target < 200 MB; k3s 512 MB-1.6 GB (published)")
    setups = [fixture_setup() for _ in range(args.runs)]
    starts = sorted(s for s, _ in setups)
    print(f"pytest fixture set-up (k8py.testing.Cluster().start()): median {starts[len(starts) // 2]:.2f} s; "
          f"stop median {sorted(s for _, s in setups)[len(setups) // 2]:.2f} s")
    if args.simulated_nodes:
        simulated(args.simulated_nodes, args.pods)
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
