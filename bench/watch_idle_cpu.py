"""What idle watches cost the API server: CPU per second with K watches open and nothing written.

An idle watch should cost nothing but its memory: no events, a bookmark per
``--watch-bookmark-interval`` when asked for. This opens K pod watches (half
with ``allowWatchBookmarks``, as informers open them; the other half plain, as
``kubectl get -w``) on this tree's API server and, with ``--baseline-src``, on
another tree's beside it, then reads each server's CPU (``/proc``) over the
same ``--seconds`` window.

    python bench/watch_idle_cpu.py [--watchers 1000] [--seconds 20] [--baseline-src /work/main/src]

The machine is shared: the figure is CPU time, which load inflates less than
wall time, but read it as an upper bound.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_load import WatchReader  # noqa: E402
from write_path_bench import cpu_seconds, start_server  # noqa: E402


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--watchers", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--baseline-src", default="")
    args = ap.parse_args()
    servers = []
    dirs = []
    readers: list[WatchReader] = []
    try:
        for label, src in [("this tree", "")] + ([("baseline", args.baseline_src)] if args.baseline_src else []):
            data = tempfile.mkdtemp(prefix="k8py-idle-watch-")
            dirs.append(data)
            proc, addr = start_server(data, [], "", src)
            servers.append((label, proc, addr))
            for i in range(args.watchers):
                reader = WatchReader()
                bookmarks = "&allowWatchBookmarks=true" if i % 2 == 0 else ""
                await reader.start(addr, f"/api/v1/pods?watch=true&resourceVersion=0{bookmarks}")
                readers.append(reader)
        await asyncio.sleep(3.0)  # every watch past its start
        before = {label: cpu_seconds(proc.pid) for label, proc, _ in servers}
        await asyncio.sleep(args.seconds)
        for label, proc, _ in servers:
            spent = cpu_seconds(proc.pid) - before[label]
            print(f"{label}: {args.watchers} idle watches: {spent / args.seconds * 1000:.1f} ms server CPU per second "
                  f"({spent / args.seconds / max(args.watchers, 1) * 1e6:.1f} µs per watch per second)", flush=True)
    finally:
        for r in readers:
            r.close()
        for _, proc, _ in servers:
            proc.terminate()
            proc.wait(10)
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
