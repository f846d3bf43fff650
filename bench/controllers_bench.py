"""Controller manager benchmarks (issue 10), each beside its baseline in the same run.

The API server and the controller manager run as their own processes
(``python -m k8py apiserver`` / ``controller-manager``), as in production.
Figures:

1. the API server's raw pod create rate: N pods POSTed by 100 concurrent
   loopback connections from this process (as many as the controller
   manager's client pools; ``--raw-connections``) (the same pod template the
   ReplicaSet uses);
2. a ReplicaSet scaled from 0 to N pods: seconds until all N exist (counted
   from a pod watch), its rate as a share of (1) (the controller should be
   bounded by the server: >= 80 %), and the controller manager's CPU seconds
   for it (from /proc); CPU per pod of the controller manager and the API
   server, which share the machine's cores (judge by those on a loaded machine);
3. D Deployments of 3 replicas, the test pod driver marking pods ready: time
   until all are available, then every template changed at once and the time
   until every rollout completes.

    python bench/controllers_bench.py [--pods 10000] [--deployments 1000]

Quick run: ``--pods 2000 --deployments 100``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

import orjson

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from http_load import create_rate, pod_body  # noqa: E402

from k8py.cli.kubeconfig import write_kubeconfig  # noqa: E402
from k8py.client.config import ClientConfig  # noqa: E402
from k8py.client.resources import DEPLOYMENTS, NAMESPACES, PODS, REPLICASETS  # noqa: E402
from k8py.client.rest import RestClient, RetryPolicy  # noqa: E402
from k8py.client.shared_informer import SharedIndexInformer, drop_managed_fields  # noqa: E402


def start(cmd: list[str], pattern: str) -> tuple[subprocess.Popen, re.Match[str]]:
    proc = subprocess.Popen([sys.executable, "-m", "k8py", *cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        m = re.search(pattern, line)
        if m:
            # keep reading what it logs: a full pipe would block the process
            threading.Thread(target=proc.stdout.read, name=f"drain-{cmd[0]}", daemon=True).start()
            return proc, m
    raise RuntimeError(f"{cmd[0]} did not start")


def scrape(url: str, metric: str, **labels: str) -> float:
    """The sum of a Prometheus metric's samples at ``url`` whose labels include ``labels``."""
    import urllib.request

    with urllib.request.urlopen(url, timeout=30) as response:
        text = response.read().decode()
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(metric + "{") and not line.startswith(metric + " "):
            continue
        head, _, value = line.rpartition(" ")
        if all(f'{k}="{v}"' in head for k, v in labels.items()):
            total += float(value)
    return total


def write_counts(url: str) -> dict[tuple[str, str], float]:
    """API writes served so far at ``url`` (a server's /metrics), by (verb, resource); conflicts
    as their own verb, ``"PUT (409)"``."""
    import urllib.request

    with urllib.request.urlopen(url, timeout=30) as response:
        text = response.read().decode()
    counts: dict[tuple[str, str], float] = {}
    for m in re.finditer(r'^apiserver_request_total\{([^}]*)\} (\S+)$', text, re.M):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if labels.get("verb") in ("POST", "PUT", "PATCH", "DELETE"):
            # a refused write (409 Conflict: a write from a stale cache) counted apart
            verb = labels["verb"] + (" (409)" if labels.get("code") == "409" else "")
            key = (verb, labels.get("resource", ""))
            counts[key] = counts.get(key, 0.0) + float(m.group(2))
    return counts


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def template() -> dict:
    pod = orjson.loads(pod_body("x", "x"))
    return {"metadata": {"labels": {"app": "bench-rs"}, "annotations": pod["metadata"]["annotations"]}, "spec": pod["spec"]}


async def count_pods(client: RestClient, namespace: str, want: int, rv: str, arrivals: list[float]) -> float:
    async with client.watch(PODS, namespace, resource_version=rv) as stream:
        async for event in stream:
            if event.type == "ADDED":
                arrivals.append(time.perf_counter())
                if len(arrivals) >= want:
                    return arrivals[-1]
    raise RuntimeError("watch ended")


def idle_gaps(began: float, arrivals: list[float], threshold: float = 0.05) -> tuple[float, int]:
    """Seconds spent in pauses of the pod stream longer than ``threshold``, and how many:
    time the controller left the API server without creates to do."""
    total, count, last = 0.0, 0, began
    for t in arrivals:
        if t - last > threshold:
            total += t - last
            count += 1
        last = t
    return total, count


def profile(pid: int, out: str) -> subprocess.Popen:
    """py-spy sampling ``pid`` into ``out`` (folded stacks) until terminated."""
    return subprocess.Popen(["py-spy", "record", "--pid", str(pid), "--rate", "100", "--format", "raw",
                             "--nonblocking", "--output", out], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop_profile(spy: subprocess.Popen | None) -> None:
    if spy is not None:
        spy.send_signal(2)  # SIGINT: py-spy writes its file and exits
        try:
            spy.wait(30)
        except subprocess.TimeoutExpired:
            spy.kill()


async def replicaset_scale_up(client: RestClient, manager_pid: int, server_pid: int, n: int,
                              profile_to: str | None) -> tuple[float, float, float, tuple[float, int]]:
    await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "rs-bench"}})
    rv = (await client.list(PODS, "rs-bench"))["metadata"]["resourceVersion"]
    arrivals: list[float] = []
    watcher = asyncio.create_task(count_pods(client, "rs-bench", n, rv, arrivals), name="count-pods")
    spy = profile(manager_pid, profile_to) if profile_to else None
    cpu0, server0 = cpu_seconds(manager_pid), cpu_seconds(server_pid)
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "big", "namespace": "rs-bench"},
          "spec": {"replicas": n, "selector": {"matchLabels": {"app": "bench-rs"}}, "template": template()}}
    began = time.perf_counter()
    await client.create(REPLICASETS, rs)
    try:
        done = await asyncio.wait_for(watcher, timeout=max(120.0, n / 50))
    finally:
        stop_profile(spy)
    return done - began, cpu_seconds(manager_pid) - cpu0, cpu_seconds(server_pid) - server0, idle_gaps(began, arrivals)


async def settled(client: RestClient, n: int) -> None:
    """Until the ReplicaSet's status counts all ``n`` pods (so the sync counts are final)."""
    for _ in range(600):
        if ((await client.get(REPLICASETS, "rs-bench", "big")).get("status") or {}).get("replicas") == n:
            return
        await asyncio.sleep(0.1)


def deployment(i: int, image: str) -> dict:
    labels = {"app": f"d{i}"}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"d{i}", "namespace": "deploy-bench"},
            "spec": {"replicas": 3, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": image}]}}}}


class Rollouts:
    """Which Deployments of ``deploy-bench`` have completed a rollout to an image,
    as an informer shows them: one watch, each event judged for its own
    Deployment (a list of all 1,000 twice a second was the bench's own load on
    the API server it measures)."""

    def __init__(self, client: RestClient) -> None:
        self.informer = SharedIndexInformer(client, DEPLOYMENTS, namespace="deploy-bench", transform=drop_managed_fields)
        self.image = ""
        self.done: set[str] = set()
        self.changed = asyncio.Event()
        self.informer.add_event_handler(on_add=self._judge, on_update=lambda old, new: self._judge(new), on_delete=lambda obj: None)

    def _judge(self, d: dict) -> None:
        st = d.get("status") or {}
        name = d["metadata"]["name"]
        if (st.get("observedGeneration") == d["metadata"]["generation"] and st.get("updatedReplicas") == 3
                and st.get("availableReplicas") == 3 and st.get("replicas") == 3
                and d["spec"]["template"]["spec"]["containers"][0]["image"] == self.image):
            self.done.add(name)
        else:
            self.done.discard(name)
        self.changed.set()

    async def all_complete(self, count: int, image: str) -> None:
        self.image, self.done = image, set()
        for d in self.informer.indexer.list():
            self._judge(d)
        while len(self.done) < count:
            self.changed.clear()
            await self.changed.wait()


async def deployments_rolled(client: RestClient, count: int, manager_pid: int, server_pid: int, server_metrics: str,
                             profile_to: str | None) -> tuple[float, float, float, float, dict[tuple[str, str], float]]:
    from tests.support.pod_driver import PodDriver

    await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "deploy-bench"}})
    driver = PodDriver(client, namespace="deploy-bench", workers=16)
    task = asyncio.create_task(driver.run(), name="pod-driver")
    rollouts = Rollouts(client)
    watching = asyncio.create_task(rollouts.informer.run(), name="deployment-informer")
    try:
        await driver.informer.wait_for_cache_sync()
        await rollouts.informer.wait_for_cache_sync()
        sem = asyncio.Semaphore(16)

        async def create(i: int) -> None:
            async with sem:
                await client.create(DEPLOYMENTS, deployment(i, "app:1"))

        began = time.perf_counter()
        await asyncio.gather(*(create(i) for i in range(count)))
        await rollouts.all_complete(count, "app:1")
        created = time.perf_counter() - began

        async def roll(i: int) -> None:
            async with sem:
                await client.patch(DEPLOYMENTS, "deploy-bench", f"d{i}",
                                   {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "app:2"}]}}}})

        began = time.perf_counter()
        cpu0, server0 = cpu_seconds(manager_pid), cpu_seconds(server_pid)
        writes0 = write_counts(server_metrics)
        spy = profile(manager_pid, profile_to) if profile_to else None
        try:
            await asyncio.gather(*(roll(i) for i in range(count)))
            await rollouts.all_complete(count, "app:2")
        finally:
            stop_profile(spy)
        rolled, cpu, server_cpu = time.perf_counter() - began, cpu_seconds(manager_pid) - cpu0, cpu_seconds(server_pid) - server0
        writes = {k: v - writes0.get(k, 0.0) for k, v in write_counts(server_metrics).items()}
        return created, rolled, cpu, server_cpu, {k: v for k, v in writes.items() if v}
    finally:
        task.cancel()
        watching.cancel()
        await asyncio.gather(task, watching, return_exceptions=True)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--deployments", type=int, default=1_000, help="0 skips the Deployment part")
    parser.add_argument("--raw-connections", type=int, default=100,
                        help="connections of the raw create rate: the controller manager's client pools 100, so "
                             "fewer would understate what the server can take (16 did: the ReplicaSet beat it)")
    parser.add_argument("--profile", metavar="PREFIX", help="py-spy the controller manager during each part into PREFIX-{rs,deploy}.txt")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server, m = start(["apiserver", "--data-dir", tmp, "--port", "0"], r"listening on http://([\d.]+):(\d+)")
        addr = f"{m.group(1)}:{m.group(2)}"
        kubeconfig = write_kubeconfig(os.path.join(tmp, "bench-kubeconfig"), f"http://{addr}")
        manager, mm = start(["controller-manager", "--kubeconfig", kubeconfig, "--port", "0",
                            "--controllers", "replicaset,deployment"], r"serving /healthz and /metrics on (http://[\d.]+:\d+)")
        manager_metrics, server_metrics = f"{mm.group(1)}/metrics", f"http://{addr}/metrics"
        try:
            async with RestClient(ClientConfig(server=f"http://{addr}"), retry=RetryPolicy(initial=0.05, cap=1.0)) as client:
                await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "raw"}})
                server0 = cpu_seconds(server.pid)
                raw = await create_rate(addr, args.pods, "raw", name_prefix="raw", concurrency=args.raw_connections)
                print(f"raw pod creates ({args.raw_connections} connections):         {raw:8.0f} pods/s "
                      f"(API server {1000 * (cpu_seconds(server.pid) - server0) / args.pods:.2f} ms/pod)", flush=True)
                seconds, cpu, server_cpu, (gaps, n_gaps) = await replicaset_scale_up(
                    client, manager.pid, server.pid, args.pods, args.profile and f"{args.profile}-rs.txt")
                rate = args.pods / seconds
                print(f"ReplicaSet 0 -> {args.pods} pods:               {seconds:8.2f} s  ({rate:.0f} pods/s, "
                      f"{100 * rate / raw:.0f}% of the raw rate; controller manager CPU {cpu:.1f} s = "
                      f"{1000 * cpu / args.pods:.2f} ms/pod, API server {server_cpu:.1f} s = "
                      f"{1000 * server_cpu / args.pods:.2f} ms/pod; pod stream paused > 50 ms {n_gaps} times, "
                      f"{gaps:.2f} s in all)", flush=True)
                await settled(client, args.pods)
                syncs = scrape(manager_metrics, "workqueue_work_duration_seconds_count", name="replicaset")
                puts = scrape(server_metrics, "apiserver_request_total", verb="PUT", resource="replicasets")
                events = scrape(server_metrics, "apiserver_request_total", verb="POST", resource="events")
                print(f"  ReplicaSet syncs until its status counted them all: {syncs:.0f}; its status PUTs: {puts:.0f}; "
                      f"Events POSTed: {events:.0f}",
                      flush=True)
                if not args.deployments:
                    return
                created, rolled, cpu, server_cpu, writes = await deployments_rolled(
                    client, args.deployments, manager.pid, server.pid, server_metrics,
                    args.profile and f"{args.profile}-deploy.txt")
                print(f"{args.deployments} Deployments x 3 created and available: {created:8.2f} s", flush=True)
                print(f"{args.deployments} Deployments rolled at once, all complete: {rolled:8.2f} s "
                      f"(controller manager CPU {cpu:.1f} s = {1000 * cpu / args.deployments:.1f} ms/rollout, "
                      f"API server {server_cpu:.1f} s = {1000 * server_cpu / args.deployments:.1f} ms/rollout)", flush=True)
                print("  API writes per rollout (the pod driver's status writes included): " + ", ".join(
                    f"{verb} {resource} {n / args.deployments:.1f}" for (verb, resource), n in sorted(writes.items())), flush=True)
        finally:
            for proc in (manager, server):
                proc.terminate()
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()


if __name__ == "__main__":
    # the bench's own pod watch must not stop for its own full collections
    # (counted as pauses of the pod stream): tuned as the processes it measures
    import gc

    gc.freeze()
    gc.set_threshold(50_000, 50, 100)
    asyncio.run(main())
