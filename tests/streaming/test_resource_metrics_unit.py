"""metrics.k8s.io arithmetic: parsing the kubelet's text, the CPU rate over two scrapes."""

from __future__ import annotations

from k8py.apiserver.streaming.resource_metrics import _cpu, _duration, _memory, parse_resource_metrics
from k8py.kubelet import stats
from k8py.kubelet.server.resource_stats import ContainerSample, Sample, render_resource_metrics


def test_what_the_kubelet_renders_the_api_server_parses():
    usage = stats.Usage(cpu_seconds=12.5, memory_bytes=3 * 1024 * 1024, timestamp=1000.0)
    sample = Sample(1000.0, 40.25, stats.NodeMemory(total=8 << 30, available=6 << 30),
                    [ContainerSample("default", "web", "uid", "main", 900.0, usage)])
    scrape = parse_resource_metrics(render_resource_metrics(sample), now=0.0)
    assert scrape.timestamp == 1000.0
    assert scrape.node_cpu == 40.25 and scrape.node_memory == 2 << 30
    assert scrape.containers == {("default", "web", "main"): (12.5, 3 * 1024 * 1024)}


def test_quantities_as_metrics_server_writes_them():
    assert _cpu(0.25) == "250000000n"
    assert _cpu(-1.0) == "0n"
    assert _memory(3 * 1024 * 1024 + 5) == "3072Ki"
    assert _duration(10.5) == "10.5s" and _duration(2.0) == "2s"


def test_the_process_tree_of_this_test_is_measured():
    import os

    usage = stats.usage_of([os.getpid()])[os.getpid()]
    assert usage.memory_bytes > 1024 * 1024 and usage.cpu_seconds > 0
    assert stats.node_memory().working_set > 0 and stats.node_cpu_seconds() > 0
    assert stats.usage_of([2**22 + 12345]) == {}


def test_cpu_is_the_rate_between_two_scrapes_and_a_cold_request_scrapes_twice():
    """A scripted kubelet endpoint (stands in for /metrics/resource so the figures are exact)."""
    import asyncio

    from aiohttp import web

    from k8py.apiserver.streaming.kubelet_client import KubeletClient
    from k8py.apiserver.streaming.resource_metrics import ResourceMetrics

    answers = iter([(1000.0, 10.0, 4.0), (1002.0, 10.5, 4.5), (1010.0, 12.5, 6.5)])
    served: list[float] = []

    async def resource(_: web.Request) -> web.Response:
        ts, node_cpu, container_cpu = next(answers)
        served.append(ts)
        ms = int(ts * 1000)
        return web.Response(text=(
            f"node_cpu_usage_seconds_total {node_cpu} {ms}\n"
            f"node_memory_working_set_bytes {512 << 20} {ms}\n"
            f'container_cpu_usage_seconds_total{{container="main",namespace="default",pod="web"}} {container_cpu} {ms}\n'
            f'container_memory_working_set_bytes{{container="main",namespace="default",pod="web"}} {64 << 20} {ms}\n'
        ))

    async def go() -> None:
        app = web.Application()
        app.router.add_get("/metrics/resource", resource)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        node = {"metadata": {"name": "node-1"}, "status": {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                                                           "daemonEndpoints": {"kubeletEndpoint": {"Port": port}}}}
        pod = {"metadata": {"name": "web", "namespace": "default"}, "spec": {"nodeName": "node-1", "containers": [{"name": "main"}]},
               "status": {"phase": "Running"}}

        async def list_objects(plural: str, namespace: str) -> list[dict]:
            return [node] if plural == "nodes" else [pod]

        async def no_get(*_: object) -> dict:
            raise AssertionError("not used")

        kubelets = KubeletClient(no_get)
        metrics = ResourceMetrics(kubelets, list_objects, min_window=0.01)
        try:
            [first] = await metrics.node_metrics()  # cold: scraped twice
            assert served == [1000.0, 1002.0]
            assert first["usage"] == {"cpu": "250000000n", "memory": f"{512 << 10}Ki"} and first["window"] == "2s"
            [pm] = await metrics.pod_metrics("default")  # warm: one more scrape, rate over 8 s
            assert served == [1000.0, 1002.0, 1010.0]
            assert pm["containers"] == [{"name": "main", "usage": {"cpu": "250000000n", "memory": f"{64 << 10}Ki"}}]
            assert pm["window"] == "8s"
        finally:
            await kubelets.close()
            await runner.cleanup()

    asyncio.run(go())


def test_a_container_with_its_own_memory_cgroup_reports_the_cgroups_working_set(tmp_path):
    """Where cgroup v1 memory is writable (as the process runtime needs for limits); elsewhere
    the figure is None and the RSS of the process tree is used instead."""
    import os
    import subprocess
    import sys
    import time

    own = None
    with open("/proc/self/cgroup", encoding="ascii") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if "memory" in controllers.split(","):
                own = path
    base = os.path.join("/sys/fs/cgroup/memory", (own or "/").lstrip("/"), f"k8py-stats-test-{os.getpid()}")
    try:
        os.makedirs(base)
    except OSError:
        base = ""
    # like the runtime's containers: join the cgroup first, then allocate (20 MiB, touched)
    join = f'echo $$ > "{base}/cgroup.procs"; ' if base else ""
    program = "x = bytearray(20 << 20)\nimport time\ntime.sleep(60)"
    proc = subprocess.Popen(["/bin/sh", "-c", f'{join}exec "$0" -c "$1"', sys.executable, program])
    try:
        deadline = time.monotonic() + 30
        while True:  # until the 20 MiB are allocated (and, with a cgroup, charged to it)
            usage = stats.usage_of([proc.pid]).get(proc.pid)
            figure = stats.cgroup_working_set(proc.pid)
            if usage is not None and usage.memory_bytes > 20 << 20 and (not base or (figure or 0) > 20 << 20):
                break
            assert time.monotonic() < deadline, (figure, usage)
            time.sleep(0.05)
        if not base:
            assert figure is None
    finally:
        proc.kill()
        proc.wait()
        if base:
            os.rmdir(base)
