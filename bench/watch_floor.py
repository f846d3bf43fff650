"""The floor for watch fan-out: a bare aiohttp server streaming pre-encoded
lines to N chunked watchers, read by the same client as the API benchmark.
No store, no cache, no selectors: what the HTTP stack alone can deliver.

The floor's server runs in its own process, as the API server does in
``apiserver_bench.py``, so the API/floor ratio compares like with like: in
both, the readers (in the benchmark process) and the server share the
machine, not one interpreter. ``run_floor`` starts it
(``python bench/watch_floor.py --serve LINE_SIZE``, which prints its port),
connects the readers, then ``POST /emit?events=N`` makes it write N events to
every watcher, as fast as it can; delivery is timed from that request to the
last event read.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time

from aiohttp import web

from http_load import HttpConnection, WatchReader


def _floor_app(line_size: int) -> web.Application:
    line = b'{"type":"ADDED","object":{"x":"' + b"a" * max(line_size - 40, 1) + b'"}}\n'
    queues: list[asyncio.Queue] = []

    async def watch(request: web.Request) -> web.StreamResponse:
        q: asyncio.Queue = asyncio.Queue()
        queues.append(q)
        resp = web.StreamResponse()
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        while True:
            n = await q.get()
            if n is None:
                break
            while not q.empty():  # coalesce whatever is queued into one write
                more = q.get_nowait()
                if more is None:
                    await resp.write(line * n)
                    return resp
                n += more
            await resp.write(line * n)
        return resp

    async def watchers(request: web.Request) -> web.Response:
        return web.Response(text=str(len(queues)))

    async def emit(request: web.Request) -> web.Response:
        events = int(request.query["events"])
        for i in range(events):
            for q in queues:
                q.put_nowait(1)
            if i % 16 == 15:
                await asyncio.sleep(0)
        return web.Response(text="ok")

    async def stop(request: web.Request) -> web.Response:
        for q in queues:
            q.put_nowait(None)
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/watch", watch)
    app.router.add_get("/watchers", watchers)
    app.router.add_post("/emit", emit)
    app.router.add_post("/stop", stop)
    return app


async def _serve(line_size: int) -> None:
    runner = web.AppRunner(_floor_app(line_size), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(site._server.sockets[0].getsockname()[1], flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


async def run_floor(watchers: int, events: int, line_size: int) -> float:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, os.path.abspath(__file__), "--serve", str(line_size), stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        addr = f"127.0.0.1:{int(await asyncio.wait_for(proc.stdout.readline(), 60))}"
        readers = [WatchReader() for _ in range(watchers)]
        for r in readers:
            await r.start(addr, "/watch")
        control = await HttpConnection.open(addr)
        while int((await control.request("GET", "/watchers"))[1]) < watchers:
            await asyncio.sleep(0.01)
        start = time.perf_counter()
        status, _ = await control.request("POST", f"/emit?events={events}", b"")
        assert status == 200, status
        deadline = time.perf_counter() + 120
        while sum(r.count for r in readers) < watchers * events:
            assert time.perf_counter() < deadline, "the floor server did not deliver every event"
            await asyncio.sleep(0.01)
        elapsed = max(r.last_at for r in readers) - start
        await control.request("POST", "/stop", b"")
        control.close()
        for r in readers:
            r.close()
        return watchers * events / elapsed
    finally:
        proc.terminate()
        await proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--serve", type=int, metavar="LINE_SIZE", help="run the floor server (prints its port)")
    ap.add_argument("--watchers", type=int, default=100)
    ap.add_argument("--events", type=int, default=2000)
    args = ap.parse_args()
    if args.serve:
        asyncio.run(_serve(args.serve))
        return
    print(f"bare aiohttp fan-out floor: {asyncio.run(run_floor(args.watchers, args.events, 1400)):,.0f} events/s")


if __name__ == "__main__":
    main()
