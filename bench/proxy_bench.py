"""kube-proxy and cluster DNS benchmarks (issue 12), each beside its baseline
in the same run.

Everything runs as its own process, as in production: the API server
(``k8py apiserver``), ``k8py controller-manager --controllers endpointslice``,
``k8py proxy``, ``k8py dns``, and a backend "pod" (a small asyncio TCP server
on its own loopback address, whose Pod object this script writes). The client
is this process. Figures:

1. short requests (64 bytes each way) on one kept-open connection, through
   the cluster IP vs straight to the pod: requests/s, p50/p99 latency, and the
   added p50 (target: <= 0.2 ms);
2. the same with a new connection per request (the dial through the proxy
   included);
3. a bulk transfer of ``--bulk-mb`` MiB: MB/s through the cluster IP vs
   direct, and their ratio (target: >= 50 %);
4. endpoint removal: the pod's Ready condition is written False while a
   client loops over the cluster IP against two pods; the time from that
   write to the last answer from the pod (target: <= 1 s);
5. DNS queries/s against ``k8py dns`` (A records of a Service, 16 in flight).

    python bench/proxy_bench.py [--requests 5000] [--bulk-mb 256] [--dns-seconds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import dns.message  # noqa: E402

from k8py.cli.kubeconfig import write_kubeconfig  # noqa: E402
from k8py.client.config import ClientConfig  # noqa: E402
from k8py.client.resources import PODS, SERVICES  # noqa: E402
from k8py.client.rest import RestClient  # noqa: E402

BACKEND = r"""
import asyncio, sys
ip, port, name = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode()
CHUNK = b"x" * (1 << 20)
async def serve(reader, writer):
    try:
        while True:
            head = await reader.readexactly(1)
            if head == b"p":                      # ping: 63 more bytes in, 64 out
                await reader.readexactly(63)
                writer.write(name.ljust(64, b" "))
            elif head == b"b":                    # bulk: 8-byte size, then that many bytes out
                size = int.from_bytes(await reader.readexactly(8), "big")
                while size > 0:
                    n = min(size, len(CHUNK)); writer.write(CHUNK[:n]); size -= n
                    await writer.drain()
                writer.write_eof(); return
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()
async def main():
    server = await asyncio.start_server(serve, ip, port)
    print("ready", flush=True)
    await server.serve_forever()
asyncio.run(main())
"""


def start(cmd: list[str], pattern: str, *, module: bool = True) -> tuple[subprocess.Popen, re.Match[str]]:
    argv = [sys.executable, "-m", "k8py", *cmd] if module else [sys.executable, "-c", *cmd]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit(f"{cmd[0]} exited: {proc.wait()}")
        m = re.search(pattern, line)
        if m:
            return proc, m
    raise SystemExit(f"{cmd[0]} did not start")


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


async def ping_persistent(ip: str, port: int, n: int) -> tuple[float, list[float]]:
    reader, writer = await asyncio.open_connection(ip, port)
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    msg = b"p" + b"." * 63
    lat = []
    started = time.perf_counter()
    for _ in range(n):
        t = time.perf_counter()
        writer.write(msg)
        await reader.readexactly(64)
        lat.append(time.perf_counter() - t)
    total = time.perf_counter() - started
    writer.close()
    return n / total, lat


async def ping_new_connections(ip: str, port: int, n: int) -> tuple[float, list[float]]:
    msg = b"p" + b"." * 63
    lat = []
    started = time.perf_counter()
    for _ in range(n):
        t = time.perf_counter()
        reader, writer = await asyncio.open_connection(ip, port)
        writer.write(msg)
        await reader.readexactly(64)
        writer.close()
        lat.append(time.perf_counter() - t)
    return n / (time.perf_counter() - started), lat


async def bulk(ip: str, port: int, size: int) -> float:
    reader, writer = await asyncio.open_connection(ip, port, limit=1 << 22)
    started = time.perf_counter()
    writer.write(b"b" + size.to_bytes(8, "big"))
    got = 0
    while True:
        chunk = await reader.read(1 << 20)
        if not chunk:
            break
        got += len(chunk)
    took = time.perf_counter() - started
    writer.close()
    assert got == size, (got, size)
    return size / took / 1e6


async def answered_by(ip: str, port: int) -> str:
    reader, writer = await asyncio.wait_for(asyncio.open_connection(ip, port), 2)
    try:
        writer.write(b"p" + b"." * 63)
        return (await asyncio.wait_for(reader.readexactly(64), 2)).decode().strip()
    finally:
        writer.close()


async def set_ready(client: RestClient, name: str, ip: str, ready: bool) -> None:
    pod = await client.get(PODS, "default", name)
    pod["status"] = {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                     "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    await client.update_status(PODS, pod)


async def dns_qps(server: str, port: int, name: str, seconds: float, in_flight: int = 16) -> float:
    loop = asyncio.get_running_loop()
    wire = dns.message.make_query(name, "A").to_wire()
    done = 0
    deadline = time.perf_counter() + seconds

    class Client(asyncio.DatagramProtocol):
        def connection_made(self, transport):  # type: ignore[no-untyped-def]
            self.transport = transport
            self.waiter: asyncio.Future[bytes] | None = None

        def datagram_received(self, data, addr):  # type: ignore[no-untyped-def]
            if self.waiter is not None and not self.waiter.done():
                self.waiter.set_result(data)

    async def worker() -> None:
        nonlocal done
        transport, proto = await loop.create_datagram_endpoint(Client, remote_addr=(server, port))
        try:
            while time.perf_counter() < deadline:
                proto.waiter = loop.create_future()
                transport.sendto(wire)
                await asyncio.wait_for(proto.waiter, 2)
                done += 1
        finally:
            transport.close()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(in_flight)))
    return done / (time.perf_counter() - started)


async def run(args: argparse.Namespace, kubeconfig: str, url: str, procs: list[subprocess.Popen]) -> None:
    port = 9000
    ips = [f"127.{random.randint(100, 127)}.{random.randint(0, 255)}.{random.randint(2, 254)}" for _ in range(2)]
    for i, ip in enumerate(ips):
        proc, _ = start([BACKEND, ip, str(port), f"pod-{i}"], r"ready", module=False)
        procs.append(proc)
    async with RestClient(ClientConfig(server=url)) as client:
        for i, ip in enumerate(ips):
            await client.create(PODS, {"metadata": {"name": f"pod-{i}", "labels": {"app": "bench" if i == 0 else "bench2"}},
                                       "spec": {"nodeName": "bench-node", "containers": [{"name": "c", "image": "x"}]}}, namespace="default")
            await set_ready(client, f"pod-{i}", ip, True)
        svc = await client.create(SERVICES, {"metadata": {"name": "bench"}, "spec": {
            "selector": {"app": "bench"}, "ports": [{"port": 80, "targetPort": port}]}}, namespace="default")
        vip = svc["spec"]["clusterIP"]
        deadline = time.monotonic() + 60
        while True:
            try:
                await answered_by(vip, 80)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("the cluster IP never answered")
                await asyncio.sleep(0.05)

        print(f"machine: {os.cpu_count()} cores, shared (other sessions may be running tests)")
        for label, fn in (("persistent connection", ping_persistent), ("new connection per request", ping_new_connections)):
            n = args.requests if fn is ping_persistent else args.requests // 5
            await fn(ips[0], port, 200)  # warm up
            await fn(vip, 80, 200)
            d_rps, d_lat = await fn(ips[0], port, n)
            p_rps, p_lat = await fn(vip, 80, n)
            added = (statistics.median(p_lat) - statistics.median(d_lat)) * 1e3
            print(f"short requests, {label} ({n}):")
            print(f"  direct      {d_rps:9.0f} req/s  p50 {statistics.median(d_lat) * 1e3:.3f} ms  p99 {pct(d_lat, 0.99) * 1e3:.3f} ms")
            print(f"  cluster IP  {p_rps:9.0f} req/s  p50 {statistics.median(p_lat) * 1e3:.3f} ms  p99 {pct(p_lat, 0.99) * 1e3:.3f} ms"
                  f"  (added p50 {added:.3f} ms)")

        size = args.bulk_mb << 20
        direct = await bulk(ips[0], port, size)
        proxied = await bulk(vip, 80, size)
        print(f"bulk {args.bulk_mb} MiB: direct {direct:.0f} MB/s, cluster IP {proxied:.0f} MB/s ({proxied / direct:.0%} of direct)")

        # endpoint removal: pod-1 joins the Service, then its readiness is written False
        pod1 = await client.get(PODS, "default", "pod-1")
        pod1["metadata"]["labels"]["app"] = "bench"
        await client.update(PODS, pod1)
        seen: set[str] = set()
        while seen != {"pod-0", "pod-1"}:
            seen.add(await answered_by(vip, 80))
        last_seen = 0.0
        written = time.monotonic()
        write = asyncio.ensure_future(set_ready(client, "pod-1", ips[1], False))
        end = written + 3.0
        while time.monotonic() < end:
            if await answered_by(vip, 80) == "pod-1":
                last_seen = time.monotonic()
        await write
        removal = max(0.0, last_seen - written)
        print(f"endpoint removal: last answer from the unready pod {removal * 1e3:.0f} ms after its readiness was written")

        dns_ip = str(ipaddress.ip_network(args.service_cidr)[10])
        dns_proc, m = start(["dns", "--kubeconfig", kubeconfig, "--bind", dns_ip, "--dns-port", "0", "--port", "0", "--no-register"],
                            r"on ([\d.]+):(\d+) \(UDP")
        procs.append(dns_proc)
        await asyncio.sleep(0.5)
        qps = await dns_qps(m.group(1), int(m.group(2)), "bench.default.svc.cluster.local", args.dns_seconds)
        print(f"DNS: {qps:.0f} queries/s (A record, 16 in flight)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--bulk-mb", type=int, default=256)
    parser.add_argument("--dns-seconds", type=float, default=3.0)
    parser.add_argument("--service-cidr", default=f"127.{random.randint(193, 207)}.{random.randint(0, 255)}.0/24")
    args = parser.parse_args()
    procs: list[subprocess.Popen] = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            api, m = start(["apiserver", "--data-dir", tmp, "--port", "0", "--service-cluster-ip-range", args.service_cidr,
                            "--kubeconfig", os.path.join(tmp, "kubeconfig")], r"listening on (http://[\d.:]+)")
            procs.append(api)
            url = m.group(1)
            kubeconfig = write_kubeconfig(os.path.join(tmp, "kubeconfig"), url)
            procs.append(start(["controller-manager", "--kubeconfig", kubeconfig, "--controllers", "endpointslice", "--port", "0"], r"/healthz")[0])
            procs.append(start(["proxy", "--kubeconfig", kubeconfig, "--node-name", "bench-node", "--port", "0"], r"/healthz")[0])
            asyncio.run(run(args, kubeconfig, url, procs))
        finally:
            for proc in reversed(procs):
                proc.terminate()
            for proc in procs:
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()


if __name__ == "__main__":
    main()
