"""The floor for watch fan-out: a bare aiohttp server streaming pre-encoded
lines to N chunked watchers, read by the same client as the API benchmark.
No store, no cache, no selectors: what the HTTP stack alone can deliver."""

from __future__ import annotations

import asyncio
import time

from aiohttp import web

from http_load import WatchReader


async def run_floor(watchers: int, events: int, line_size: int) -> float:
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

    app = web.Application()
    app.router.add_get("/watch", watch)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    readers = [WatchReader() for _ in range(watchers)]
    for r in readers:
        await r.start(f"127.0.0.1:{port}", "/watch")
    while len(queues) < watchers:
        await asyncio.sleep(0.01)
    start = time.perf_counter()
    for i in range(events):
        for q in queues:
            q.put_nowait(1)
        if i % 16 == 15:
            await asyncio.sleep(0)
    while sum(r.count for r in readers) < watchers * events:
        await asyncio.sleep(0.01)
    elapsed = max(r.last_at for r in readers) - start
    for q in queues:
        q.put_nowait(None)
    for r in readers:
        r.close()
    await runner.cleanup()
    return watchers * events / elapsed
