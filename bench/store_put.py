"""Raw put throughput of the store: the floor under the API server's write path.

Runs N creates of ``--value-size`` byte values (default 3,000 B, the size of a
realistic Pod in JSON) against a fresh SQLite store, first one at a time, then
from 16 concurrent writers, and prints writes per second for each. Use the
figures as the baseline when benchmarking the API server: a create through the
API cannot be faster than a create into its store.

    python bench/store_put.py --n 5000

:func:`measure_put_throughput` works with any ``Storage`` (e.g. etcd).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time

from k8py.storage.interface import Storage
from k8py.storage.sqlite import SqliteStorage


async def measure_put_throughput(
    storage: Storage,
    n: int,
    concurrency: int,
    *,
    value_size: int = 3000,
    prefix: str = "/bench/",
) -> float:
    """Create ``n`` fresh keys under ``prefix`` from ``concurrency`` writers
    (each writing its share one after the other); returns writes per second.
    ``prefix`` must hold no keys yet."""
    value = os.urandom(value_size // 2).hex().encode()[:value_size]
    shares = [range(w, n, concurrency) for w in range(concurrency)]

    async def writer(indexes: range) -> None:
        for i in indexes:
            await storage.create(f"{prefix}{i:08d}", value)

    started = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        for w, share in enumerate(shares):
            group.create_task(writer(share), name=f"bench-writer-{w}")
    return n / (time.perf_counter() - started)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5000, help="writes per measurement (default 5000)")
    parser.add_argument("--value-size", type=int, default=3000, help="bytes per value (default 3000)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16], help="writer counts to measure")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="k8py-bench-") as tmp:
        store = SqliteStorage(os.path.join(tmp, "store.db"))
        await store.start()
        try:
            for concurrency in args.concurrency:
                tx_before, writes_before = store.transaction_count, store.write_count
                rate = await measure_put_throughput(
                    store, args.n, concurrency, value_size=args.value_size, prefix=f"/bench/c{concurrency}/"
                )
                per_tx = (store.write_count - writes_before) / max(1, store.transaction_count - tx_before)
                label = "sequential" if concurrency == 1 else f"{concurrency} concurrent writers"
                print(
                    f"sqlite {label:>22}: {rate:8.0f} writes/s"
                    f"  ({args.n} creates of {args.value_size} B, {per_tx:.1f} writes/transaction)"
                )
        finally:
            await store.close()


if __name__ == "__main__":
    asyncio.run(main())
