"""The scheduler's own HTTP endpoints: ``/healthz``, ``/readyz`` and ``/metrics``.

``/healthz`` is ok while the process runs its loop; ``/readyz`` once the
informers have synced and this instance leads (or runs without leader
election) — a standby answers 503 with why. Served by aiohttp on the port
given (0 picks a free one); :attr:`url` says where.
"""

from __future__ import annotations

from typing import Callable

from aiohttp import web

__all__ = ["HealthServer"]


class HealthServer:
    def __init__(self, *, metrics: Callable[[], bytes], ready: Callable[[], str | None],
                 bind: str = "127.0.0.1", port: int = 0) -> None:
        self._metrics = metrics
        self._ready = ready
        self.bind = bind
        self.port = port
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/livez", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics_handler)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.bind, self.port)
        await site.start()
        sockets = site._server.sockets if site._server is not None else ()  # type: ignore[union-attr]
        self.port = sockets[0].getsockname()[1] if sockets else self.port
        self.url = f"http://{self.bind}:{self.port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _readyz(self, request: web.Request) -> web.Response:
        problem = self._ready()
        if problem:
            return web.Response(status=503, text=f"[-]{problem}\nreadyz check failed\n")
        return web.Response(text="ok")

    async def _metrics_handler(self, request: web.Request) -> web.Response:
        return web.Response(body=self._metrics(), content_type="text/plain", charset="utf-8",
                            headers={"X-Content-Type-Options": "nosniff"})
