"""An HTTP-aware fault proxy for controller tests (aiohttp, loopback, free port).

Requests are forwarded to the real API server unchanged; the test can

- make some requests fail: ``proxy.reject("POST", r"/pods$", 403, "...")``
  answers matching requests with a Kubernetes ``Status`` of that code (the
  server never sees them) until ``proxy.clear_rejections()``;
- make watches lag: with ``proxy.watch_lag = 1.5`` every chunk of a watch
  stream is held that many seconds before it is passed on (in order), so an
  informer behind the proxy sees every event late, as behind a slow network
  or an overloaded API server;
- make writes slow: with ``proxy.write_delay = 0.5`` every request other than
  a GET or a watch is held that long before it is forwarded (a loaded server's
  latency); ``proxy.max_writes_in_flight`` is the most held at once.

Counters: ``proxy.requests[(method, path)]``. It is a stand-in only for the
network between a client and the server; the server is real.
"""

from __future__ import annotations

import asyncio
import collections
import re

import aiohttp
import orjson
from aiohttp import web

__all__ = ["HTTPFaultProxy"]

_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding", "host"}


class HTTPFaultProxy:
    def __init__(self, target_url: str) -> None:
        self.target = target_url.rstrip("/")
        self.watch_lag = 0.0
        self.write_delay = 0.0
        self.max_writes_in_flight = 0
        self._writes_in_flight = 0
        self._rules: list[tuple[str, re.Pattern[str], int, str]] = []
        self.requests: collections.Counter[tuple[str, str]] = collections.Counter()
        self.rejected = 0
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def reject(self, method: str, path_pattern: str, code: int, message: str, reason: str = "Forbidden") -> None:
        self._rules.append((method.upper(), re.compile(path_pattern), code, f"{reason}\0{message}"))

    def clear_rejections(self) -> None:
        self._rules.clear()

    async def start(self) -> HTTPFaultProxy:
        self._session = aiohttp.ClientSession(auto_decompress=False, timeout=aiohttp.ClientTimeout(total=None))
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        # close the upstream side first: that ends the open watch streams, so
        # the server's shutdown does not wait for them
        if self._session is not None:
            await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()

    async def __aenter__(self) -> HTTPFaultProxy:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.requests[(request.method, request.path)] += 1
        for method, pattern, code, text in self._rules:
            if method == request.method and pattern.search(request.path):
                self.rejected += 1
                reason, message = text.split("\0", 1)
                status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                          "message": message, "reason": reason, "code": code}
                return web.Response(status=code, body=orjson.dumps(status), content_type="application/json")
        assert self._session is not None
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        is_watch = request.query.get("watch") in ("true", "1", "True")
        if self.write_delay and request.method != "GET" and not is_watch:
            self._writes_in_flight += 1
            self.max_writes_in_flight = max(self.max_writes_in_flight, self._writes_in_flight)
            try:
                await asyncio.sleep(self.write_delay)  # the latency this proxy stands in for
            finally:
                self._writes_in_flight -= 1
        try:
            return await self._forward(request, body, headers, is_watch)
        except (aiohttp.ClientError, RuntimeError, ConnectionResetError):
            return web.Response(status=502, text="proxy: upstream gone")

    async def _forward(self, request: web.Request, body: bytes, headers: dict[str, str], is_watch: bool) -> web.StreamResponse:
        assert self._session is not None
        async with self._session.request(request.method, self.target + request.path_qs, headers=headers,
                                         data=body or None) as upstream:
            response = web.StreamResponse(status=upstream.status,
                                          headers={k: v for k, v in upstream.headers.items() if k.lower() not in _HOP})
            await response.prepare(request)
            if not is_watch or self.watch_lag <= 0:
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
                return response
            # a lagging watch: every chunk passes after watch_lag seconds, in order
            pending: asyncio.Queue[tuple[float, bytes | None]] = asyncio.Queue()
            loop = asyncio.get_running_loop()

            async def forward() -> None:
                while True:
                    due, chunk = await pending.get()
                    delay = due - loop.time()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    if chunk is None:
                        return
                    await response.write(chunk)

            writer = asyncio.create_task(forward(), name="lagging-watch-writer")
            try:
                async for chunk in upstream.content.iter_any():
                    pending.put_nowait((loop.time() + self.watch_lag, chunk))
                pending.put_nowait((loop.time() + self.watch_lag, None))
                await writer
            finally:
                writer.cancel()
            return response
