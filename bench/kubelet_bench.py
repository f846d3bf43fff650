"""Kubelet figures: pod start-up latency, pods per kubelet, idle CPU.

Starts a real API server (``k8py apiserver``) and a real kubelet
(``k8py kubelet``) as processes on free ports, then:

1. **start-up latency** (upstream's SLI: creation → all containers started,
   observed through a watch) over ``--pods`` pods bound to the node
   (``spec.nodeName``; no scheduler in the path), created ``--rate`` per
   second, on the process runtime and then on the simulated one (the
   control plane's share). Times are taken client-side: from just before
   the create request to the watch event that shows every container
   running (creationTimestamp has only second precision);
2. **pods per kubelet**: ``--many`` sleeping pods on one kubelet
   (``--max-pods`` raised), time until all run, and the kubelet's RSS;
3. **idle CPU** of the kubelet process with ``--idle-pods`` pods running,
   over ``--idle-seconds``, from /proc (utime+stime).

Targets from the issue: p50 ≤ 100 ms, p99 ≤ 500 ms; 500 pods on one kubelet;
idle < 2% of a core with 100 pods. Run small: ``--pods 20 --many 50``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from k8py.client.kubeconfig import load_kubeconfig
from k8py.client.resources import NAMESPACES, PODS
from k8py.client.rest import RestClient


def _start(args: list[str], pattern: str, timeout: float = 120) -> tuple[subprocess.Popen[str], re.Match[str]]:
    proc = subprocess.Popen([sys.executable, "-m", "k8py", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        m = re.search(pattern, line)
        if m:
            # keep reading its output: a full pipe would block the component's next log write
            threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()  # type: ignore[union-attr]
            return proc, m
    proc.kill()
    raise RuntimeError("".join(seen))


def _stop(procs: list[subprocess.Popen[str]], timeout: float = 30) -> None:
    """SIGTERM each component, newest first (the kubelet before its API server); SIGKILL any that outlives ``timeout``."""
    for p in reversed(procs):
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _pod(name: str, node: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": "busybox", "imagePullPolicy": "IfNotPresent", "command": ["sleep", "3600"]}]}}


def _all_running(pod: dict) -> bool:
    sts = (pod.get("status") or {}).get("containerStatuses") or []
    return bool(sts) and all("running" in (s.get("state") or {}) for s in sts)


async def _launch(client: RestClient, ns: str, names: list[str], node: str, rate: float) -> dict[str, float]:
    """Create the pods at ``rate``/s; returns name -> seconds from create to all-running."""
    created: dict[str, float] = {}
    done: dict[str, float] = {}
    finished = asyncio.Event()
    lst = await client.list(PODS, ns)
    rv = lst["metadata"]["resourceVersion"]

    async def watch() -> None:
        last = rv
        while True:  # a watch may end (server timeout): resume from the last event seen
            async for ev in client.watch(PODS, ns, resource_version=last):
                obj = ev.object
                last = (obj.get("metadata") or {}).get("resourceVersion") or last
                name = obj["metadata"].get("name", "")
                if name in created and name not in done and _all_running(obj):
                    done[name] = time.perf_counter() - created[name]
                    if len(done) == len(names):
                        finished.set()
                        return

    watcher = asyncio.create_task(watch(), name="bench-watch")
    for name in names:
        created[name] = time.perf_counter()
        await client.create(PODS, dict(_pod(name, node), metadata={"name": name, "namespace": ns}))
        if rate > 0:
            await asyncio.sleep(1.0 / rate)
    try:
        await asyncio.wait_for(finished.wait(), 600)
    finally:
        watcher.cancel()
    return done


async def _delete_all(client: RestClient, ns: str) -> None:
    await client.delete_collection(PODS, ns)
    for _ in range(600):
        if not (await client.list(PODS, ns))["items"]:
            return
        await asyncio.sleep(0.2)


def _pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


async def _scenario(kubeconfig: str, label: str, ns: str, count: int, node: str, rate: float) -> list[float]:
    client = RestClient(load_kubeconfig(kubeconfig))
    try:
        await client.create(NAMESPACES, {"metadata": {"name": ns}})
        done = await _launch(client, ns, [f"p{i}" for i in range(count)], node, rate)
        lat = [v * 1000 for v in done.values()]
        print(f"{label:<44} n={len(lat):4d}  p50 {_pct(lat, 50):7.1f} ms  p99 {_pct(lat, 99):7.1f} ms  max {max(lat):7.1f} ms")
        return lat
    finally:
        await client.close()


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def main() -> int:
    signal.signal(signal.SIGTERM, _interrupt)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", type=int, default=100)
    ap.add_argument("--rate", type=float, default=10.0, help="pods created per second for the latency runs")
    ap.add_argument("--many", type=int, default=500)
    ap.add_argument("--idle-pods", type=int, default=100)
    ap.add_argument("--idle-seconds", type=float, default=30.0)
    ap.add_argument("--settle", type=float, default=20.0, help="seconds between the idle pods running and the CPU measurement")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="kubelet-bench-")
    procs: list[subprocess.Popen[str]] = []
    try:
        api, _ = _start(["apiserver", "--data-dir", f"{tmp}/api", "--port", "0"], r"listening on (http://\S+)")
        procs.append(api)
        kc = f"{tmp}/api/kubeconfig"
        maxpods = str(max(args.many, args.idle_pods, args.pods) + 10)
        # a /22 of pod IPs (1,021 pods): a /24 holds only 253; a random one, as other kubelets may share this machine
        cidr = f"127.{random.randint(65, 127)}.{random.randrange(0, 256, 4)}.0/22"
        kubelet, _ = _start(["kubelet", "--kubeconfig", kc, "--node-name", "bench", "--root-dir", f"{tmp}/kubelet", "--port", "0",
                             "--max-pods", maxpods, "--pod-cidr", cidr], r"running\b")
        procs.append(kubelet)
        sim, _ = _start(["kubelet", "--kubeconfig", kc, "--node-name", "sim", "--root-dir", f"{tmp}/sim", "--port", "0",
                         "--simulated", "--nodes", "1", "--max-pods", maxpods], r"running\b")
        procs.append(sim)
        print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start (shared machine)")
        asyncio.run(_scenario(kc, f"start-up, process runtime, {args.rate:g} pods/s", "lat-process", args.pods, "bench", args.rate))
        asyncio.run(_scenario(kc, f"start-up, simulated runtime, {args.rate:g} pods/s", "lat-sim", args.pods, "sim-0", args.rate))

        async def cleanup(ns: str) -> None:
            client = RestClient(load_kubeconfig(kc))
            try:
                await _delete_all(client, ns)
            finally:
                await client.close()

        asyncio.run(cleanup("lat-process"))
        started = time.perf_counter()
        lat = asyncio.run(_scenario(kc, f"{args.many} sleeping pods on one kubelet, burst", "many", args.many, "bench", 0))
        print(f"{'':<44} all {len(lat)} running after {time.perf_counter() - started:.1f} s; kubelet RSS {_rss_mib(kubelet.pid):.0f} MiB")
        asyncio.run(cleanup("many"))
        asyncio.run(_scenario(kc, f"{args.idle_pods} pods for the idle measurement", "idle", args.idle_pods, "bench", 0))
        time.sleep(args.settle)  # let the start-up tail (status writes, Events) finish first
        before, t0 = _cpu_seconds(kubelet.pid), time.monotonic()
        time.sleep(args.idle_seconds)
        used = (_cpu_seconds(kubelet.pid) - before) / (time.monotonic() - t0) * 100
        print(f"idle kubelet with {args.idle_pods} pods: {used:.2f}% of a core over {args.idle_seconds:g} s "
              f"(RSS {_rss_mib(kubelet.pid):.0f} MiB)")
        asyncio.run(cleanup("idle"))
        return 0
    finally:
        _stop(procs)
        # containers of the process runtime keep running after a kubelet stops: stop ours
        _kill_recorded(f"{tmp}/kubelet")
        from k8py.kubelet.cgroups.tree import CgroupTree, node_cgroup_name

        # the emptied QoS and pod levels, and the kubelet's k8py-bench-<tag of its root dir> itself
        # (an untagged CgroupTree("bench") is another tree, made and removed here, leaving the kubelet's)
        CgroupTree(node_cgroup_name("bench", f"{tmp}/kubelet")).close()
        shutil.rmtree(tmp, ignore_errors=True)


def _kill_recorded(root: str) -> None:
    import json

    from k8py.kubelet.runtime.process.records import is_same_process

    base = os.path.join(root, "runtime", "containers")
    dirs: list[str] = []
    for cid in os.listdir(base) if os.path.isdir(base) else []:
        try:
            with open(os.path.join(base, cid, "record.json"), encoding="utf-8") as f:
                rec = json.load(f)
        except (OSError, ValueError):
            continue
        if rec.get("state") == "CONTAINER_RUNNING" and is_same_process(rec.get("pid", 0), rec.get("start_ticks", 0)):
            try:
                os.killpg(rec["pid"], signal.SIGKILL)
            except ProcessLookupError:
                pass
        dirs.extend(rec.get("cgroups") or [])
    deadline = time.monotonic() + 20
    for d in dirs + sorted({os.path.dirname(d) for d in dirs}):  # each container's cgroup, then the kubelet's own
        while os.path.isdir(d) and time.monotonic() < deadline:
            try:
                os.rmdir(d)
            except OSError:
                time.sleep(0.05)


if __name__ == "__main__":
    sys.exit(main())
