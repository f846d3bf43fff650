"""Streaming benchmarks: exec round trips and port-forward throughput, each beside its floor.

A real API server (in this process's thread) and a real ``k8py kubelet``
process (process runtime), one pod each. Figures:

1. **exec round trip** of ``true`` over WebSocket (v5.channel.k8s.io), p50/p99
   of N: through the API server's ``pods/exec`` relay, and straight to the
   kubelet's ``/exec`` (the relay's floor); plus ``kubectl exec`` wall time
   beside ``kubectl get pod`` (kubectl's own start-up, the floor of any
   command);
2. **port-forward throughput**: M MiB read over ``kubectl port-forward``
   (SPDY tunnelled in a WebSocket, relayed by the API server, served by the
   kubelet) beside the same read straight from the pod's IP.

    python bench/streaming_bench.py [--execs 50] [--mib 64]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import sys
import tempfile
import time
from typing import Awaitable, Callable

import aiohttp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tests.kubelet.conftest import pod_manifest, ready, start_node  # noqa: E402
from tests.support.kube import official_client  # noqa: E402

SERVER = """
import socket, os
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((os.environ["POD_IP"], 8080)); s.listen(16)
block = b"\\0" * 65536
while True:
    c, _ = s.accept()
    n = int(c.recv(64).decode().strip() or 0)
    while n > 0:
        c.sendall(block[: min(n, len(block))]); n -= len(block)
    c.close()
"""


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


async def exec_once(session: aiohttp.ClientSession, url: str, params: list[tuple[str, str]]) -> float:
    start = time.perf_counter()
    async with session.ws_connect(url, params=params, protocols=("v5.channel.k8s.io",)) as ws:
        async for msg in ws:
            if msg.type == aiohttp.WSMsgType.BINARY and msg.data[:1] == b"\x03":
                break
    return time.perf_counter() - start


async def exec_figures(api_url: str, kubelet_url: str, ns: str, n: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"relay": [], "kubelet": []}
    async with aiohttp.ClientSession() as session:
        via_api = api_url.replace("http", "ws", 1) + f"/api/v1/namespaces/{ns}/pods/shell/exec"
        direct = kubelet_url.replace("http", "ws", 1) + f"/exec/{ns}/shell/main"
        api_params = [("command", "true"), ("stdout", "true")]
        kubelet_params = [("command", "true"), ("output", "1")]
        for _ in range(n):
            out["relay"].append(await exec_once(session, via_api, api_params))
            out["kubelet"].append(await exec_once(session, direct, kubelet_params))
    return out


def timed(fn: Callable[[], object], n: int) -> list[float]:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def read_stream(host: str, port: int, nbytes: int) -> float:
    start = time.perf_counter()
    with socket.create_connection((host, port), timeout=60) as s:
        s.sendall(f"{nbytes}\n".encode())
        got = 0
        while chunk := s.recv(1 << 20):
            got += len(chunk)
    elapsed = time.perf_counter() - start
    assert got >= nbytes, (got, nbytes)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--execs", type=int, default=50)
    parser.add_argument("--mib", type=int, default=64)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server, kubelet, kubectl = start_node(tmp)
        api = official_client(server.url)
        try:
            import kubernetes

            core = kubernetes.client.CoreV1Api(api)
            ns = "bench"
            core.create_namespace({"metadata": {"name": ns}})
            core.create_namespaced_pod(ns, pod_manifest("shell", [{"name": "main", "image": "busybox", "command": ["sleep", "3600"]}]))
            core.create_namespaced_pod(ns, pod_manifest("source", [{
                "name": "main", "image": "python", "command": ["python3", "-c", SERVER],
                "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 1}}]))
            deadline = time.monotonic() + 120
            pods = {}
            while time.monotonic() < deadline and len(pods) < 2:
                for name in ("shell", "source"):
                    p = api.sanitize_for_serialization(core.read_namespaced_pod(name, ns))
                    if ready(p):
                        pods[name] = p
                time.sleep(0.2)
            assert len(pods) == 2, "the bench pods never became Ready"

            figures = asyncio.run(exec_figures(server.url, f"http://127.0.0.1:{kubelet.port}", ns, args.execs))
            print(f"exec `true` over WebSocket, {args.execs} runs (ms)   p50      p99")
            for name, label in (("relay", "through the API server"), ("kubelet", "straight to the kubelet")):
                ms = [v * 1000 for v in figures[name]]
                print(f"  {label:<40} {pct(ms, 50):7.2f}  {pct(ms, 99):7.2f}")
            n = max(3, args.execs // 10)
            k_exec = timed(lambda: kubectl.run("exec", "-n", ns, "shell", "--", "true"), n)
            k_get = timed(lambda: kubectl.run("get", "pod", "-n", ns, "shell"), n)
            print(f"kubectl wall time, {n} runs (ms, median): exec true {statistics.median(k_exec) * 1000:.0f}, "
                  f"get pod {statistics.median(k_get) * 1000:.0f} (kubectl's own floor)")

            nbytes = args.mib << 20
            pod_ip = pods["source"]["status"]["podIP"]
            direct = min(read_stream(pod_ip, 8080, nbytes) for _ in range(3))
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                local = s.getsockname()[1]
            pf = kubectl.popen("port-forward", "-n", ns, "pod/source", f"{local}:8080")
            try:
                assert pf.stdout is not None and pf.stdout.readline().startswith("Forwarding")
                forwarded = min(read_stream("127.0.0.1", local, nbytes) for _ in range(3))
            finally:
                pf.terminate()
                pf.wait(30)
            print(f"read {args.mib} MiB (best of 3): straight from the pod IP {args.mib / direct:8.1f} MiB/s, "
                  f"through kubectl port-forward {args.mib / forwarded:8.1f} MiB/s")
        finally:
            api.close()
            kubelet.stop()
            kubelet.kill_containers()
            server.stop()


if __name__ == "__main__":
    main()
