"""serve_watch lets a cancellation through and still cleans up.

When the client goes away aiohttp (with ``handler_cancellation``) or a
shutdown cancels the watch handler: the stream must unregister its watcher
in ``finally`` and re-raise, never turn the cancellation into a normal return.
"""

from __future__ import annotations

import asyncio

import aiohttp
from aiohttp import web

from k8py.apiserver.handlers.codec import negotiate
from k8py.apiserver.handlers.query import parse_query
from k8py.apiserver.handlers.watch_stream import serve_watch


async def test_a_cancelled_watch_handler_reraises_and_unregisters_its_watcher(cacher, configmaps):
    cache = cacher.cache_for(configmaps)
    outcome: list[str] = []
    opened = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        params = {"watch": "true", "resourceVersion": "0"}
        try:
            response = await serve_watch(
                request, definition=configmaps, cacher=cacher, cache=cache, query=parse_query(configmaps, "default", params),
                params=params, fmt=negotiate(None), bookmark_interval=30.0, on_open=lambda delta: opened.set(),
            )
        except asyncio.CancelledError:
            outcome.append("cancelled")
            raise
        outcome.append("returned")
        return response

    app = web.Application()
    app.router.add_get("/watch", handler)
    runner = web.AppRunner(app, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        async with aiohttp.ClientSession() as session:
            resp = await session.get(f"http://127.0.0.1:{port}/watch")
            await asyncio.wait_for(opened.wait(), 30)
            assert cache.watcher_count == 1
            resp.close()  # the client goes away: aiohttp cancels the handler
        async with asyncio.timeout(30):
            while not outcome:
                await asyncio.sleep(0.01)
        assert outcome == ["cancelled"]
        assert cache.watcher_count == 0
    finally:
        await runner.cleanup()
