"""Scheduler benchmarks: upstream scheduler_perf's workload shapes, end to end.

The API server and the scheduler run as their own processes (``python -m k8py
apiserver`` / ``python -m k8py scheduler``); this process creates the nodes,
the already-placed pods, then the pods to schedule (pre-encoded POSTs, 4 in
flight on each of 16 connections: ``pipelined_posts``, as cheap as a client
can be, since it shares the cores), and watches them bind. Figures, per workload:

- **pods/s end to end**: from the first measured pod created to the last bound;
- the create rate alone (how fast this process got the pods in);
- scheduler memory per node (RSS growth from 0 to N nodes, divided by N);

and, once per run, where the time goes:

- **scheduling cycle alone**: filter + score + assume per pod, in this
  process, on the same node and pod shapes, no API at all;
- **bind floor**: ``pods/binding`` POSTs alone (pipelined the same way), no scheduler;
- each process's CPU per measured pod (API server, scheduler, this load generator).

Workloads (``--workloads``): ``basic`` (SchedulingBasic: 4-cpu/32Gi nodes,
100m/500Mi pods), ``antiaffinity`` (SchedulingPodAntiAffinity: required
anti-affinity per hostname), ``spread`` (TopologySpreading: 3 zones,
maxSkew 5 DoNotSchedule), ``preemption`` (low-priority pods fill the nodes,
high-priority pods preempt them; this process plays the kubelet and removes
each victim once deleted).

    python bench/scheduler_bench.py                      # full sizes (5,000 nodes, 1,000 placed, 10,000 pods)
    python bench/scheduler_bench.py --quick              # 500 nodes, 100 placed, 1,000 pods
    python bench/scheduler_bench.py --nodes 1000 --pods 2000 --workloads basic,spread
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from typing import Any

import orjson

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from component_processes import (cpu_seconds, get_json, metric, metric_counts, ready, rss,  # noqa: E402
                                 start, start_profilers, stop, stop_profilers)
from http_load import HttpConnection  # noqa: E402
from pipelined_posts import BoundWatcher, post_all, post_prepared, prepare  # noqa: E402
from scheduler_workloads import cycle_alone, measured_pod, node_obj, pod_obj  # noqa: E402

CONNECTIONS = 16


def log(message: str) -> None:
    print(f"  {time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


async def resource_version(addr: str, namespace: str) -> str:
    listed = await get_json(addr, f"/api/v1/namespaces/{namespace}/pods?limit=1")
    return listed["metadata"]["resourceVersion"]


# -- one workload ------------------------------------------------------------------------------------

async def run_workload(kind: str, args: argparse.Namespace, python: str) -> dict[str, Any]:
    data = tempfile.mkdtemp(prefix="k8py-sched-bench-")
    api = sched = None
    spies: list[Any] = []
    try:
        api, url = start([python, "-m", "k8py", "apiserver", "--data-dir", data, "--port", "0"], r"listening on (http://\S+)")
        addr = url.split("//", 1)[1]
        kubeconfig = os.path.join(data, "kubeconfig")
        for ns in ("sched-setup", "sched-test"):
            await post_all(addr, [("/api/v1/namespaces", orjson.dumps({"metadata": {"name": ns}}))], 1)
        nodes, placed, pods = args.nodes, args.init_pods, args.pods
        if kind in ("antiaffinity", "spread"):
            pods = min(args.constrained_pods, nodes - placed)  # upstream measures 1,000 of these
        if kind == "preemption":
            nodes, placed, pods = args.preemption_nodes, args.preemption_nodes * 4, args.preemption_nodes
        config = os.path.join(data, "scheduler.yaml")
        with open(config, "w") as f:  # as scheduler_perf: its clients' QPS and burst are 5000 (the Events' too)
            f.write(f"apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                    f"clientConnection: {{qps: {args.client_qps}, burst: {max(int(args.client_qps), 1)}}}\n")
        sched_cmd = [python, "-m", "k8py", "scheduler", "--kubeconfig", kubeconfig, "--config", config,
                     *(["--no-events"] if args.no_events else [])]
        sched, sched_url = start(sched_cmd, r"on (http://\S+)")
        while not await ready(sched_url):
            await asyncio.sleep(0.05)
        rss0 = rss(sched.pid)
        zones = kind == "spread"
        node_reqs = [("/api/v1/nodes", orjson.dumps(node_obj(i, zones=zones))) for i in range(nodes)]
        t_nodes = await post_all(addr, node_reqs)
        log(f"[{kind}] {nodes} nodes created in {t_nodes:.1f}s")
        init = []
        for i in range(placed):
            if kind == "preemption":
                body = pod_obj(f"low-{i}", "sched-setup", cpu="900m", memory="1Gi", node=f"node-{i % nodes}", priority=0)
            else:
                body = measured_pod(kind, f"init-{i}", "sched-setup", node=f"node-{i % nodes}")
            init.append(("/api/v1/namespaces/sched-setup/pods", orjson.dumps(body)))
        log(f"[{kind}] {placed} placed pods created in {await post_all(addr, init):.1f}s")
        while await metric(sched_url, "scheduler_cache_size{type=\"nodes\"}") < nodes:
            await asyncio.sleep(0.1)
        while await metric(sched_url, "scheduler_cache_size{type=\"pods\"}") < placed:
            await asyncio.sleep(0.1)
        rss1 = rss(sched.pid)
        log(f"[{kind}] scheduler cache synced; creating {pods} pods")
        rv = await resource_version(addr, "sched-test")
        measured = []
        for i in range(pods):
            if kind == "preemption":
                body = pod_obj(f"high-{i}", "sched-test", cpu="900m", memory="1Gi", priorityClassName="system-cluster-critical")
            else:
                body = measured_pod(kind, f"p-{i}", "sched-test")
            measured.append(("/api/v1/namespaces/sched-test/pods", orjson.dumps(body)))
        kubelet = None
        if kind == "preemption":
            kubelet = asyncio.create_task(play_kubelet(addr, await resource_version(addr, "sched-setup")))
        prepared = prepare(addr, measured)
        bound = BoundWatcher(addr, "sched-test", pods, rv)
        watcher = asyncio.create_task(bound.run(), name="bench-bound-watcher")
        spies = start_profilers(args.profile, kind, {"apiserver": api.pid, "scheduler": sched.pid, "load": os.getpid()})
        requests0 = await metric_counts(url, "apiserver_request_total", ("verb", "resource", "subresource"))
        events0 = await metric_counts(url, "apiserver_watch_events_total", ("resource",))
        cpu0 = (cpu_seconds(api.pid), cpu_seconds(sched.pid), time.process_time())
        t0 = time.perf_counter()
        queued: list[float] = []
        sampler = asyncio.create_task(sample_queue(sched_url, queued), name="bench-queue-sampler")
        t_create = await post_prepared(addr, prepared, connections=CONNECTIONS)
        log(f"[{kind}] {pods} pods created in {t_create:.1f}s; {len(bound.bound)} bound so far")
        try:
            t_last = await asyncio.wait_for(watcher, args.timeout)
        except TimeoutError:
            conn = await HttpConnection.open(sched_url.split("//", 1)[1])
            _, text = await conn.request("GET", "/metrics")
            conn.close()
            lines = [l for l in text.decode().splitlines() if l.startswith(("scheduler_pending", "scheduler_schedule_attempts_total", "scheduler_cache"))]
            raise RuntimeError(f"timed out: {len(bound.bound)}/{pods} bound; scheduler: {lines}") from None
        cpu = (cpu_seconds(api.pid) - cpu0[0], cpu_seconds(sched.pid) - cpu0[1], time.process_time() - cpu0[2])
        sampler.cancel()
        requests = await metric_counts(url, "apiserver_request_total", ("verb", "resource", "subresource")) - requests0
        watch_events = await metric_counts(url, "apiserver_watch_events_total", ("resource",)) - events0
        watchers = await metric_counts(url, "apiserver_registered_watchers", ("resource",))
        events_later = await settled_event_posts(url, args.events_wait) - requests0[("POST", "events", "")]
        stop_profilers(spies)
        spies = []
        if kubelet is not None:
            kubelet.cancel()
        return {"cpu": cpu, "wall": t_last - t0, "kind": kind, "nodes": nodes, "placed": placed, "pods": pods, "pods_per_s": pods / (t_last - t0),
                "create_per_s": pods / t_create, "nodes_per_s": nodes / t_nodes,
                "bytes_per_node": max(rss1 - rss0, 0) / max(nodes, 1), "sched_rss": rss1,
                "requests": requests, "watch_events": watch_events, "watchers": watchers, "queued": queued,
                "events_later": events_later}
    finally:
        stop_profilers(spies)
        stop(sched)
        stop(api)
        shutil.rmtree(data, ignore_errors=True)


async def play_kubelet(addr: str, rv: str) -> None:
    """Preempted pods are deleted gracefully; with no kubelet, finish the deletion."""
    host, port = addr.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port), limit=2**26)
    writer.write(f"GET /api/v1/namespaces/sched-setup/pods?watch=true&resourceVersion={rv} HTTP/1.1\r\nHost: {addr}\r\n\r\n".encode())
    while (await reader.readline()) not in (b"\r\n", b""):
        pass
    conn = await HttpConnection.open(addr)
    buf = b""
    try:
        while True:
            size = int((await reader.readline()).strip(), 16)
            buf += await reader.readexactly(size)
            await reader.readline()
            *lines, buf = buf.split(b"\n")
            for line in lines:
                if not line:
                    continue
                event = orjson.loads(line)
                meta = event["object"]["metadata"]
                if event["type"] == "MODIFIED" and meta.get("deletionTimestamp"):
                    await conn.request("DELETE", f"/api/v1/namespaces/sched-setup/pods/{meta['name']}",
                                       orjson.dumps({"gracePeriodSeconds": 0}))
    finally:
        writer.close()
        conn.close()


async def bind_floor(args: argparse.Namespace, python: str) -> tuple[float, float]:
    """(binds/s, creates/s): bindings POSTed alone, with no scheduler running."""
    data = tempfile.mkdtemp(prefix="k8py-bind-floor-")
    api = None
    try:
        api, url = start([python, "-m", "k8py", "apiserver", "--data-dir", data, "--port", "0"], r"listening on (http://\S+)")
        addr = url.split("//", 1)[1]
        n = min(args.pods, 5000)
        await post_all(addr, [("/api/v1/nodes", orjson.dumps(node_obj(0)))], 1)
        t_create = await post_all(addr, [("/api/v1/namespaces/default/pods", orjson.dumps(pod_obj(f"p-{i}", "default")))
                                         for i in range(n)])
        binds = [(f"/api/v1/namespaces/default/pods/p-{i}/binding",
                  orjson.dumps({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": f"p-{i}"},
                                "target": {"kind": "Node", "name": "node-0"}})) for i in range(n)]
        t_bind = await post_all(addr, binds)
        return n / t_bind, n / t_create
    finally:
        stop(api)
        shutil.rmtree(data, ignore_errors=True)


async def settled_event_posts(url: str, wait: float) -> float:
    """Event POSTs so far, once they stop coming (at most ``wait`` seconds): the
    scheduler's queued Events are still being written after the last bind."""
    last, deadline = -1.0, time.monotonic() + wait
    while True:
        now = (await metric_counts(url, "apiserver_request_total", ("verb", "resource")))[("POST", "events")]
        if now == last or time.monotonic() > deadline:
            return now
        last = now
        await asyncio.sleep(2.0)


async def sample_queue(sched_url: str, out: list[float]) -> None:
    """The scheduler's active queue every 2 s: near 0, it keeps up with the pods as
    they come (the API server is what waits); growing, it is the bottleneck. (A
    scrape costs the scheduler ~2 ms: every 2 s, under 0.01 ms per pod.)"""
    while True:
        out.append(await metric(sched_url, 'scheduler_pending_pods{queue="active"}'))
        await asyncio.sleep(2.0)


def print_requests(kind: str, r: dict[str, Any]) -> None:
    """The API requests served and the watch events made while measured, per measured pod."""
    per_pod = r["pods"]
    served = ", ".join(f"{verb} {resource}{'/' + sub if sub else ''} {n / per_pod:.3f}"
                       for (verb, resource, sub), n in sorted(r["requests"].items(), key=lambda kv: -kv[1])
                       if n > 0 and verb != "WATCH")
    print(f"[{kind}]   API requests per pod: {served}", flush=True)
    events = ", ".join(f"{res} {n / per_pod:.2f} (to {int(r['watchers'].get((res,), 0))} watchers)"
                       for (res,), n in sorted(r["watch_events"].items(), key=lambda kv: -kv[1]) if n > 0)
    print(f"[{kind}]   watch events per pod: {events}", flush=True)
    print(f"[{kind}]   Event POSTs per pod including those written after the last bind: "
          f"{r['events_later'] / per_pod:.3f} (below 1: some were never written)", flush=True)
    queued = r["queued"] or [0.0]
    print(f"[{kind}]   scheduler's active queue while measured: mean {sum(queued) / len(queued):,.0f}, "
          f"max {max(queued):,.0f} pods ({len(queued)} samples)", flush=True)


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument("--init-pods", type=int, default=1000)
    p.add_argument("--pods", type=int, default=10000)
    p.add_argument("--constrained-pods", type=int, default=1000, help="pods measured in antiaffinity and spread")
    p.add_argument("--preemption-nodes", type=int, default=500)
    p.add_argument("--workloads", default="basic,antiaffinity,spread,preemption")
    p.add_argument("--quick", action="store_true", help="500 nodes, 100 placed, 1,000 pods, 100 preemption nodes")
    p.add_argument("--no-events", action="store_true", help="run the scheduler with --no-events")
    p.add_argument("--client-qps", type=float, default=5000.0,
                   help="the scheduler's clientConnection qps and burst: scheduler_perf's 5000 (default: an Event per "
                        "scheduled pod, as upstream's figures include), or kube-scheduler's default 50")
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--events-wait", type=float, default=60.0,
                   help="seconds to wait after the last bind for the scheduler's queued Events to be written")
    p.add_argument("--profile", metavar="DIR", help="py-spy each process during the measured window into DIR/<workload>-<process>.raw")
    args = p.parse_args()
    if args.quick:
        args.nodes, args.init_pods, args.pods, args.preemption_nodes, args.constrained_pods = 500, 100, 1000, 100, 300
    python = sys.executable
    print(f"scheduler benchmark: {os.cpu_count()} cpus; API server, scheduler and this load generator share them; "
          f"scheduler clientConnection qps/burst {args.client_qps:g}", flush=True)
    for kind in args.workloads.split(","):
        kind = kind.strip()
        if kind != "preemption":
            measured = min(args.pods, 2000) if kind == "basic" else min(args.constrained_pods, args.nodes - args.init_pods)
            alone = cycle_alone(args.nodes, args.init_pods, measured, kind)
            print(f"[{kind}] scheduling cycle alone ({args.nodes} nodes, no API): {alone:,.0f} pods/s", flush=True)
        r = await run_workload(kind, args, python)
        print(f"[{kind}] {r['nodes']} nodes, {r['placed']} placed, {r['pods']} pods: "
              f"{r['pods_per_s']:,.0f} pods/s end to end (first created -> last bound); "
              f"created at {r['create_per_s']:,.0f}/s; scheduler memory {r['bytes_per_node'] / 1024:.1f} KiB/node "
              f"(RSS {r['sched_rss'] / 2**20:.0f} MiB)", flush=True)
        api_cpu, sched_cpu, load_cpu = r["cpu"]
        print(f"[{kind}]   CPU while measured ({r['wall']:.1f}s wall): API server {api_cpu:.1f}s "
              f"({api_cpu * 1000 / r['pods']:.2f} ms/pod), scheduler {sched_cpu:.1f}s ({sched_cpu * 1000 / r['pods']:.2f} ms/pod), "
              f"load generator {load_cpu:.1f}s ({load_cpu * 1000 / r['pods']:.2f} ms/pod); "
              f"machine load average {os.getloadavg()[0]:.1f}", flush=True)
        print_requests(kind, r)
    binds, creates = await bind_floor(args, python)
    print(f"bind floor (pods/binding alone, {CONNECTIONS} connections): {binds:,.0f} binds/s; "
          f"pod creates alone: {creates:,.0f}/s", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
