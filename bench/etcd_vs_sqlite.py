"""The API server benchmarks on etcd beside the embedded SQLite store (issue 5).

One run starts a throwaway 1-member etcd (``k8py.cli.etcd``), then for each
backend an API server process (``python -m k8py apiserver``, on ``--data-dir``
or on ``--etcd-servers``) and measures, with the pieces of
``apiserver_bench.py``:

1. creates/s from 16 concurrent clients;
2. create latency p50/p99 at a fixed 100 creates/s (open loop);
3. list of N pods (default 10,000) from the watch cache: median latency;
4. watch fan-out: 100 watchers on one namespace, events/s delivered.

Beside them, each store's own write rate: for etcd, etcd's own tool
(``etcdctl check perf --load=l``, see ``etcd_put.etcdctl_write_throughput``:
its clients in Go, so k8py's etcd client is not part of the baseline), with
the rate through k8py's client (16 guarded-create txns in flight) printed
for reference; for SQLite, ``store_put.measure_put_throughput`` (16 in
flight; the store is in-process, there is no other client). The API overhead
is printed as API creates/s ÷ raw puts/s; the issue's target for etcd is
>= 0.50.

    python bench/etcd_vs_sqlite.py [--creates 3000] [--pods 10000] [--watchers 100]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import uuid
from dataclasses import dataclass

import orjson

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from apiserver_bench import create_latency_at_rate, fill, list_latency, pct, start_server, watch_fanout  # noqa: E402
from etcd_put import etcdctl_write_throughput, measure_etcd_put_throughput  # noqa: E402
from http_load import HttpConnection, create_rate, pod_body  # noqa: E402
from store_put import measure_put_throughput  # noqa: E402

from k8py.cli.etcd import start_etcd_cluster  # noqa: E402

CONCURRENCY = 16


@dataclass
class Figures:
    backend: str
    raw_puts: float = 0.0
    raw_capped: bool = False
    client_puts: float = 0.0  # etcd: through k8py's etcd client (for reference)
    creates: float = 0.0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    list_ms: float = 0.0
    listed: int = 0
    fanout: float = 0.0

    @property
    def ratio(self) -> float:
        return self.creates / self.raw_puts if self.raw_puts else 0.0


async def raw_sqlite_puts(data_dir: str, n: int) -> float:
    from k8py.storage.sqlite import SqliteStorage

    store = SqliteStorage(os.path.join(data_dir, "raw.db"))
    await store.start()
    try:
        return await measure_put_throughput(store, n, CONCURRENCY, value_size=len(pod_body("x", "ns")) + 300)
    finally:
        await store.close()


async def raw_etcd_puts(endpoints: list[str], n: int) -> float:
    from k8py.storage.etcd import EtcdStorage

    store = EtcdStorage(endpoints, prefix=f"/bench-raw-{uuid.uuid4().hex[:8]}/registry", compaction_interval=None)
    await store.start()
    try:
        await measure_etcd_put_throughput(store, 200, CONCURRENCY)  # warm the connection pool
        # the same value size as the SQLite baseline and the API's pods
        return await measure_etcd_put_throughput(store, n, CONCURRENCY, value_size=len(pod_body("x", "ns")) + 300)
    finally:
        await store.close()


async def api_figures(figures: Figures, server_args: list[str], data_dir: str, args: argparse.Namespace) -> None:
    proc, addr, _ = start_server(data_dir, *server_args)
    try:
        c = await HttpConnection.open(addr)
        for ns in ("bench", "lat", "big", "watch"):
            await c.request("POST", "/api/v1/namespaces", orjson.dumps({"metadata": {"name": ns}}))
        c.close()
        await create_rate(addr, 300, "bench", concurrency=CONCURRENCY)  # warm-up (names tp-0..299)
        figures.creates = await create_rate(addr, args.creates, "lat", concurrency=CONCURRENCY)
        print(f"  {figures.backend}: creates/s {figures.creates:,.0f}", flush=True)
        latencies = await create_latency_at_rate(addr, 100, args.latency_seconds, "bench")
        figures.p50_ms, figures.p99_ms = pct(latencies, 0.5) * 1e3, pct(latencies, 0.99) * 1e3
        await fill(addr, args.pods, "big")
        median, figures.listed, _ = await list_latency(addr, "big")
        figures.list_ms = median * 1e3
        print(f"  {figures.backend}: list of {figures.listed:,} pods {figures.list_ms:.0f} ms", flush=True)
        figures.fanout, _ = await watch_fanout(addr, args.watchers, args.watch_events, None, "watch")
    finally:
        proc.terminate()
        proc.wait(10)


def report(rows: list[Figures], watchers: int) -> None:
    print()
    print(f"{'':40}{'SQLite':>12}{'etcd':>12}")
    lines = [
        ("raw store puts/s (etcd: etcdctl)", [f"{'>=' if r.raw_capped else ''}{r.raw_puts:,.0f}" for r in rows]),
        ("etcd puts/s via k8py's client (16)", ["", f"{rows[1].client_puts:,.0f}"]),
        ("API creates/s (16 clients)", [f"{r.creates:,.0f}" for r in rows]),
        ("API creates/s ÷ raw puts/s", [f"{r.ratio:.2f}" for r in rows]),
        ("create latency p50 at 100/s (ms)", [f"{r.p50_ms:.1f}" for r in rows]),
        ("create latency p99 at 100/s (ms)", [f"{r.p99_ms:.1f}" for r in rows]),
        (f"list of {rows[0].listed:,} pods, median (ms)", [f"{r.list_ms:.0f}" for r in rows]),
        (f"watch fan-out, {watchers} watchers (events/s)", [f"{r.fanout:,.0f}" for r in rows]),
    ]
    for label, values in lines:
        print(f"{label:40}" + "".join(f"{v:>12}" for v in values))
    etcd = rows[1]
    verdict = "meets" if etcd.ratio >= 0.5 else "misses"
    print(f"\netcd: API creates/s are {etcd.ratio:.0%} of the raw etcd put rate ({verdict} the >= 50% target)")


async def run(args: argparse.Namespace, etcd_urls: list[str], tmp: str) -> None:
    sqlite = Figures("sqlite")
    etcd = Figures("etcd")
    sqlite.raw_puts = await raw_sqlite_puts(tmp, args.creates)
    etcd.raw_puts, etcd.raw_capped = await asyncio.to_thread(etcdctl_write_throughput, etcd_urls)
    etcd.client_puts = await raw_etcd_puts(etcd_urls, args.creates)
    print(f"  raw puts/s: sqlite {sqlite.raw_puts:,.0f}, etcd {etcd.raw_puts:,.0f} (etcdctl), {etcd.client_puts:,.0f} (k8py's client)", flush=True)
    await api_figures(sqlite, [], os.path.join(tmp, "api-sqlite"), args)
    prefix = f"/bench-api-{uuid.uuid4().hex[:8]}/registry"
    await api_figures(etcd, ["--etcd-servers", ",".join(etcd_urls), "--etcd-prefix", prefix], os.path.join(tmp, "api-etcd"), args)
    report([sqlite, etcd], args.watchers)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--creates", type=int, default=3_000)
    ap.add_argument("--pods", type=int, default=10_000)
    ap.add_argument("--watchers", type=int, default=100)
    ap.add_argument("--watch-events", type=int, default=1_000)
    ap.add_argument("--latency-seconds", type=float, default=10.0)
    ap.add_argument("--etcd-servers", default="", help="use this etcd (comma-separated URLs) instead of starting one")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="k8py-bench-etcd-") as tmp:
        if args.etcd_servers:
            asyncio.run(run(args, args.etcd_servers.split(","), tmp))
            return
        with start_etcd_cluster(os.path.join(tmp, "etcd")) as cluster:
            asyncio.run(run(args, cluster.client_urls, tmp))


if __name__ == "__main__":
    main()
