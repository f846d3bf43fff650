"""Raw etcd put throughput: etcd's own tool, and from Python through k8py's etcd client.

:func:`etcdctl_write_throughput` is the baseline the API benchmarks divide
by: ``etcdctl check perf --load=l`` (etcd's own client, in Go: 500 clients
writing for 60 s, rate-limited at 8,000 writes/s; when the store cannot keep
up, the figure it reports as too low is the rate it sustained). It is what
etcd itself delivers on this machine, free of k8py's JSON-gateway client.

Each put is an ``EtcdStorage.create`` (a guarded txn: create_revision == 0 ->
put) of a 1,012-byte value, the same shape the API server writes, so the
figure is what object creation costs in the store before any API-server work.

Usage:
    python bench/etcd_put.py                          # starts a throwaway 1-member etcd
    python bench/etcd_put.py --endpoints http://127.0.0.1:2379 -n 5000

Prints sequential and 16-in-flight puts/s.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import subprocess
import tempfile
import time
import uuid

from k8py.cli.etcd import start_etcd_cluster
from k8py.storage.etcd import EtcdStorage
from k8py.storage.interface import Storage

VALUE = b"x" * 1012


async def measure_etcd_put_throughput(
    storage: Storage, n: int, concurrency: int, *, value_size: int = len(VALUE)
) -> float:
    """Create ``n`` fresh keys with at most ``concurrency`` in flight; puts/s."""
    run = uuid.uuid4().hex[:8]
    queue = iter(range(n))
    value = (VALUE * (value_size // len(VALUE) + 1))[:value_size]

    async def worker() -> None:
        for i in queue:
            await storage.create(f"/registry/bench/{run}/{i:08d}", value)

    started = time.perf_counter()
    async with asyncio.TaskGroup() as tg:
        for w in range(concurrency):
            tg.create_task(worker(), name=f"etcd-put-worker-{w}")
    return n / (time.perf_counter() - started)


_ETCDCTL_CAP = 8000.0  # --load=l's rate limit


def etcdctl_write_throughput(endpoints: list[str]) -> tuple[float, bool]:
    """(writes/s sustained by ``etcdctl check perf --load=l``, True if it hit the tool's cap)."""
    etcdctl = shutil.which("etcdctl")
    if etcdctl is None:
        raise RuntimeError("etcdctl not installed (Debian's etcd-client); it measures the raw etcd baseline")
    done = subprocess.run(
        [etcdctl, "--endpoints", ",".join(endpoints), "check", "perf", "--load=l", "--prefix", f"/bench-perf-{uuid.uuid4().hex[:8]}/"],
        capture_output=True, text=True, timeout=300,
    )
    out = done.stdout + done.stderr
    m = re.search(r"Throughput (?:is|too low:) (\d+) writes/s", out)
    if m is None:
        raise RuntimeError(f"etcdctl check perf printed no throughput: {out[-500:]}")
    rate = float(m.group(1))
    return rate, rate >= _ETCDCTL_CAP


async def bench(endpoints: list[str], n: int, rounds: int) -> None:
    storage = EtcdStorage(endpoints, prefix=f"/bench-{uuid.uuid4().hex[:8]}/registry",
                          compaction_interval=None)
    await storage.start()
    try:
        await measure_etcd_put_throughput(storage, 200, 16)  # warm up connections
        for r in range(1, rounds + 1):
            seq = await measure_etcd_put_throughput(storage, n, 1)
            par = await measure_etcd_put_throughput(storage, n, 16)
            print(f"round {r}: sequential {seq:7.0f} put/s   16 in flight {par:7.0f} put/s  (n={n}, k8py's client)")
    finally:
        await storage.close()
    rate, capped = await asyncio.to_thread(etcdctl_write_throughput, endpoints)
    print(f"etcdctl check perf --load=l: {'>= ' if capped else ''}{rate:,.0f} writes/s (etcd's own client)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoints", help="comma-separated member URLs (default: start etcd)")
    parser.add_argument("-n", type=int, default=3000, help="puts per measurement")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    if args.endpoints:
        asyncio.run(bench(args.endpoints.split(","), args.n, args.rounds))
        return
    with tempfile.TemporaryDirectory(prefix="k8py-bench-etcd-") as data_dir:
        with start_etcd_cluster(data_dir) as cluster:
            asyncio.run(bench(cluster.client_urls, args.n, args.rounds))


if __name__ == "__main__":
    main()
