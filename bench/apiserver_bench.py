"""API server benchmarks (issue 2), each beside its baseline in the same run.

The API server runs as its own process (``python -m k8py apiserver``), as in
production; the load comes from this process over loopback with a raw asyncio
HTTP/1.1 client (cheap, so the server is what is measured). Figures:

1. start-up: command to "listening" (ready) in seconds;
2. creates/s from 16 concurrent clients, against the raw store's put rate with
   16 concurrent writers measured in this process (API overhead as a ratio);
3. create latency p50/p99 at a fixed 100 creates/s (open loop);
4. list of N pods (default 10,000) from the cache: latency; server memory per
   stored pod (RSS growth / pods);
5. watch fan-out: 100 watchers on one namespace, events/s delivered in total
   (writers as fast as they go) and p99 delivery latency at 500 events/s,
   against a bare aiohttp fan-out of pre-encoded lines of the same size to the
   same client (the floor);
6. with ``--authorization-mode=Node,RBAC``: creates/s and create p50 beside 2 and 3,
   and one RBAC decision for an ordinary user, in process (``rbac_decision.py``), and the create
   p50 of a bound user over HTTPS, AlwaysAllow against Node,RBAC interleaved (``rbac_interleaved.py``);
7. security: creates/s and create latency (2. and 3.) again against servers on
   HTTPS (``--secure-port``) whose clients authenticate with a client
   certificate (``--client-ca-file``), without and with ``Node,RBAC``, beside
   the insecure-port figures of the same run (issue 14: at most 20% fewer
   creates/s, at most +1 ms on p50).

    python bench/apiserver_bench.py [--pods 10000] [--creates 5000] [--watchers 100] [--only-security]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import orjson

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from http_load import HttpConnection, WatchReader, create_rate, pod_body  # noqa: E402
from watch_floor import run_floor  # noqa: E402
from store_put import measure_put_throughput  # noqa: E402
from rbac_decision import measure_rbac_decision  # noqa: E402
from rbac_interleaved import measure_interleaved  # noqa: E402


def start_server(data_dir: str, *extra: str) -> tuple[subprocess.Popen, str, float]:
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "k8py", "apiserver", "--data-dir", data_dir, "--port", "0", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        m = re.search(r"listening on http://([\d.]+):(\d+)", line)
        if m:
            return proc, f"{m.group(1)}:{m.group(2)}", time.perf_counter() - started
    raise RuntimeError("server did not start")


def start_secure_server(data_dir: str, *extra: str) -> tuple[subprocess.Popen, str, "ssl.SSLContext"]:
    """An API server on HTTPS only, authenticating clients by certificate; the client's TLS context."""
    import ssl

    from k8py.client import certs

    os.makedirs(data_dir, exist_ok=True)
    ca = certs.new_self_signed_ca("bench-ca")
    ca.save(os.path.join(data_dir, "ca.crt"), os.path.join(data_dir, "ca.key"))
    cert, key = ca.issue_client("bench", ["system:masters"])
    certs.write_pem(os.path.join(data_dir, "client.crt"), certs.encode_cert_pem(cert))
    certs.write_pem(os.path.join(data_dir, "client.key"), certs.encode_private_key_pem(key), private=True)
    # an ordinary user, whom only an RBAC binding lets write (see rbac_user_context)
    cert, key = ca.issue_client("bench-user", ["bench-users"])
    certs.write_pem(os.path.join(data_dir, "user.crt"), certs.encode_cert_pem(cert))
    certs.write_pem(os.path.join(data_dir, "user.key"), certs.encode_private_key_pem(key), private=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "k8py", "apiserver", "--data-dir", data_dir, "--secure-port", "0",
         "--client-ca-file", os.path.join(data_dir, "ca.crt"), "--anonymous-auth=false", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        m = re.search(r"listening on https://([\d.]+):(\d+)", line)
        if m:
            ctx = ssl.create_default_context(cafile=os.path.join(data_dir, "certs", "apiserver.crt"))
            ctx.load_cert_chain(os.path.join(data_dir, "client.crt"), os.path.join(data_dir, "client.key"))
            return proc, f"{m.group(1)}:{m.group(2)}", ctx
    raise RuntimeError("secure server did not start")


def rbac_user_context(data_dir: str) -> "ssl.SSLContext":
    """The TLS context of the ordinary user ``bench-user`` (group ``bench-users``)."""
    import ssl

    ctx = ssl.create_default_context(cafile=os.path.join(data_dir, "certs", "apiserver.crt"))
    ctx.load_cert_chain(os.path.join(data_dir, "user.crt"), os.path.join(data_dir, "user.key"))
    return ctx


async def bind_bench_users(addr: str) -> None:
    """As system:masters: a ClusterRole to create namespaces and pods, bound to the group bench-users."""
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    c = await HttpConnection.open(addr)
    status, _ = await c.request("POST", f"{rbac}/clusterroles", orjson.dumps({
        "metadata": {"name": "bench-writer"},
        "rules": [{"apiGroups": [""], "resources": ["namespaces", "pods"], "verbs": ["create", "get", "list"]}]}))
    assert status == 201, status
    status, _ = await c.request("POST", f"{rbac}/clusterrolebindings", orjson.dumps({
        "metadata": {"name": "bench-writer"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "bench-writer"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "bench-users"}]}))
    assert status == 201, status
    c.close()


async def creates_and_latency(addr: str, n: int, prefix: str) -> tuple[float, list[float]]:
    c = await HttpConnection.open(addr)
    for ns in (f"{prefix}bench", f"{prefix}lat"):
        status, _ = await c.request("POST", "/api/v1/namespaces", orjson.dumps({"metadata": {"name": ns}}))
        assert status == 201, status
    c.close()
    creates = await create_rate(addr, n, f"{prefix}bench")
    lat = await create_latency_at_rate(addr, 100, 10, f"{prefix}lat")
    return creates, lat


async def security_cost(tmp: str, n: int) -> None:
    """7.: the same creates over the insecure port, and over HTTPS with a client certificate:
    system:masters without and with Node,RBAC (the privileged-group shortcut), and an ordinary
    user whose RoleBinding-free ClusterRoleBinding RBAC resolves on every request."""
    proc, addr, _ = start_server(os.path.join(tmp, "plain"))
    try:
        plain, plain_lat = await creates_and_latency(addr, n, "")
    finally:
        proc.terminate()
        proc.wait(10)
    p50 = pct(plain_lat, .5)
    print(f"creates/s, insecure port:                {plain:,.0f}; create p50 at 100/s {p50 * 1e3:.1f} ms, p99 {pct(plain_lat, .99) * 1e3:.1f} ms")
    rbac = ("--authorization-mode", "Node,RBAC")
    for label, extra, user in (("HTTPS + client cert:", (), False), ("HTTPS + client cert + Node,RBAC:", rbac, False),
                               ("HTTPS + cert + RBAC, bound user:", rbac, True)):
        data = os.path.join(tmp, "secure" + "-rbac" * bool(extra) + "-user" * user)
        proc, addr, ctx = start_secure_server(data, *extra)
        HttpConnection.ssl_context = ctx
        try:
            if user:
                await bind_bench_users(addr)
                HttpConnection.ssl_context = rbac_user_context(data)
            secure, secure_lat = await creates_and_latency(addr, n, "")
        finally:
            HttpConnection.ssl_context = None
            proc.terminate()
            proc.wait(10)
        print(f"creates/s, {label:<32} {secure:,.0f}   (secure/insecure = {secure / plain:.2f}; target >= 0.80); "
              f"create p50 {pct(secure_lat, .5) * 1e3:.1f} ms ({(pct(secure_lat, .5) - p50) * 1e3:+.1f} ms; target <= +1 ms), "
              f"p99 {pct(secure_lat, .99) * 1e3:.1f} ms")


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))]


async def create_latency_at_rate(addr: str, rate: float, seconds: float, namespace: str) -> list[float]:
    """Open loop: a request starts every 1/rate s on its own connection from a pool."""
    pool = [await HttpConnection.open(addr) for _ in range(32)]
    free: asyncio.Queue[HttpConnection] = asyncio.Queue()
    for c in pool:
        free.put_nowait(c)
    latencies: list[float] = []
    path = f"/api/v1/namespaces/{namespace}/pods"

    async def one(i: int) -> None:
        c = await free.get()
        t0 = time.perf_counter()
        status, _ = await c.request("POST", path, pod_body(f"lat-{i}", namespace))
        latencies.append(time.perf_counter() - t0)
        assert status == 201, status
        free.put_nowait(c)

    tasks = []
    start = time.perf_counter()
    total = int(rate * seconds)
    for i in range(total):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(i)))
    await asyncio.gather(*tasks)
    for c in pool:
        c.close()
    return latencies


async def list_latency(addr: str, namespace: str, rounds: int = 5) -> tuple[float, int, int]:
    c = await HttpConnection.open(addr)
    times = []
    count = size = 0
    for _ in range(rounds):
        t0 = time.perf_counter()
        status, body = await c.request("GET", f"/api/v1/namespaces/{namespace}/pods")
        times.append(time.perf_counter() - t0)
        assert status == 200
        size = len(body)
        count = len(orjson.loads(body)["items"])
    c.close()
    return statistics.median(times), count, size


async def fill(addr: str, n: int, namespace: str) -> None:
    conns = [await HttpConnection.open(addr) for _ in range(16)]

    async def worker(c: HttpConnection, idx: range) -> None:
        for i in idx:
            status, _ = await c.request("POST", f"/api/v1/namespaces/{namespace}/pods", pod_body(f"p-{i}", namespace))
            assert status == 201, status

    await asyncio.gather(*(worker(c, range(w, n, 16)) for w, c in enumerate(conns)))
    for c in conns:
        c.close()


async def watch_fanout(addr: str, watchers: int, events: int, rate: float | None, namespace: str) -> tuple[float, list[float]]:
    """Returns (events/s delivered in total, delivery latencies sampled by one
    watcher in its own process)."""
    c = await HttpConnection.open(addr)
    status, body = await c.request("GET", f"/api/v1/namespaces/{namespace}/pods?limit=1")
    rv = orjson.loads(body)["metadata"]["resourceVersion"]
    path = f"/api/v1/namespaces/{namespace}/pods?watch=true&resourceVersion={rv}"
    probe = await asyncio.create_subprocess_exec(
        sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "latency_probe.py"),
        addr, path, str(events), stdout=asyncio.subprocess.PIPE,
    )
    assert probe.stdout is not None
    assert (await probe.stdout.readline()).strip() == b"ready"
    readers = [WatchReader() for _ in range(watchers - 1)]
    for r in readers:
        await r.start(addr, path)
    await asyncio.sleep(0.5)
    writers = [await HttpConnection.open(addr) for _ in range(16)]
    start = time.perf_counter()

    async def writer(w: HttpConnection, idx: range) -> None:
        for i in idx:
            if rate:
                delay = start + i / rate - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
            status, _ = await w.request(
                "POST", f"/api/v1/namespaces/{namespace}/pods", pod_body(f"w-{i}", namespace, stamp=True)
            )
            assert status == 201, status

    await asyncio.gather(*(writer(w, range(k, events, 16)) for k, w in enumerate(writers)))
    deadline = time.perf_counter() + 120
    while sum(r.count for r in readers) < (watchers - 1) * events and time.perf_counter() < deadline:
        await asyncio.sleep(0.02)
    result = orjson.loads(await asyncio.wait_for(probe.stdout.readline(), 120))
    elapsed = (max(r.last_at for r in readers) if readers else time.perf_counter()) - start
    await probe.wait()
    delivered = sum(r.count for r in readers) + result["count"]
    for r in readers:
        r.close()
    for w in writers:
        w.close()
    c.close()
    assert delivered == watchers * events, f"delivered {delivered} of {watchers * events}"
    return delivered / elapsed, result["latencies"]


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pods", type=int, default=10_000)
    ap.add_argument("--creates", type=int, default=5_000)
    ap.add_argument("--watchers", type=int, default=100)
    ap.add_argument("--watch-events", type=int, default=2_000)
    ap.add_argument("--only-security", action="store_true", help="only 6. (the HTTPS + client certificate cost)")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="k8py-bench-")
    if args.only_security:
        try:
            await security_cost(tmp, args.creates)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return

    # baseline: the raw store's put rate, 16 concurrent writers, same value size
    from k8py.storage.sqlite import SqliteStorage

    raw_store = SqliteStorage(os.path.join(tmp, "raw.db"))
    await raw_store.start()
    raw = await measure_put_throughput(raw_store, args.creates, 16, value_size=len(pod_body("x", "ns")) + 300)
    await raw_store.close()

    proc, addr, ready = start_server(os.path.join(tmp, "api"))
    try:
        c = await HttpConnection.open(addr)
        for ns in ("bench", "lat", "big", "watch", "watch2"):
            await c.request("POST", "/api/v1/namespaces", orjson.dumps({"metadata": {"name": ns}}))
        c.close()
        print(f"start-up (command to ready):            {ready:.2f} s   (target < 1 s)")

        creates = await create_rate(addr, args.creates, "bench")
        print(f"creates/s, 16 concurrent clients:        {creates:,.0f}   (target >= 1,500)")
        print(f"raw store puts/s, 16 concurrent writers: {raw:,.0f}   API/raw = {creates / raw:.2f}")

        lat = await create_latency_at_rate(addr, 100, 10, "lat")
        print(f"create latency at 100/s:                 p50 {pct(lat, .5) * 1e3:.1f} ms, p99 {pct(lat, .99) * 1e3:.1f} ms   (target p99 <= 50 ms)")

        before = rss_bytes(proc.pid)
        await fill(addr, args.pods, "big")
        await asyncio.sleep(1.0)
        after = rss_bytes(proc.pid)
        median, count, size = await list_latency(addr, "big")
        print(f"list of {count:,} pods ({size / 1e6:.1f} MB):          {median * 1e3:.0f} ms median   (target <= 200 ms)")
        print(f"server memory per stored pod:            {(after - before) / args.pods / 1024:.2f} KiB (RSS growth {(after - before) / 1e6:.0f} MB)   (target <= 5 KB)")

        tput, _ = await watch_fanout(addr, args.watchers, args.watch_events, None, "watch")
        _, lat500 = await watch_fanout(addr, args.watchers, 1500, 500.0, "watch2")
        floor = await run_floor(args.watchers, args.watch_events, len(pod_body("w-0", "watch", stamp=True)) + 400)
        print(f"watch fan-out, {args.watchers} watchers:               {tput:,.0f} events/s delivered   (target >= 20,000)")
        print(f"bare aiohttp fan-out floor (same client): {floor:,.0f} events/s   API/floor = {tput / floor:.2f}")
        print(f"watch delivery latency at 500 events/s:  p50 {pct(lat500, .5) * 1e3:.1f} ms, p99 {pct(lat500, .99) * 1e3:.1f} ms   (target p99 <= 50 ms)")
    finally:
        proc.terminate()
        proc.wait(10)

    # the same create figures with authorization on (issue 14): requests on the insecure port are
    # system:masters (the privileged-group shortcut); the RBAC decision of an ordinary user is
    # measured in process beside it
    proc, addr, _ = start_server(os.path.join(tmp, "api-rbac"), "--authorization-mode", "Node,RBAC")
    try:
        c = await HttpConnection.open(addr)
        for ns in ("bench", "lat"):
            await c.request("POST", "/api/v1/namespaces", orjson.dumps({"metadata": {"name": ns}}))
        c.close()
        secured = await create_rate(addr, args.creates, "bench")
        lat_on = await create_latency_at_rate(addr, 100, 10, "lat")
        print(f"creates/s with Node,RBAC:                {secured:,.0f}   ({(1 - secured / creates) * 100:+.0f}% cost; target <= 20%)")
        print(f"create p50 at 100/s with Node,RBAC:      {pct(lat_on, .5) * 1e3:.1f} ms ({(pct(lat_on, .5) - pct(lat, .5)) * 1e3:+.2f} ms; target <= +1 ms)")
    finally:
        proc.terminate()
        proc.wait(10)
    warm, cold = await measure_rbac_decision()
    print(f"RBAC decision, RoleBinding user, 1,000 bindings: {warm:.1f} µs (first after a policy change {cold / 1e3:.1f} ms)")
    ab = await measure_interleaved(1000)
    (allow_p50, _), (rbac_p50, _) = ab["AlwaysAllow"], ab["Node,RBAC"]
    print(f"create p50, bound user over HTTPS, A/B interleaved: AlwaysAllow {allow_p50 * 1e3:.2f} ms, "
          f"Node,RBAC {rbac_p50 * 1e3:.2f} ms ({(rbac_p50 - allow_p50) * 1e3:+.2f} ms; target <= +1 ms)")
    try:
        await security_cost(tmp, args.creates)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
