"""``/healthz``, ``/readyz`` and ``/metrics`` for the proxy and DNS processes.

Kept apart from what is served: the process says whether it is ready
(``ready()`` returns None, or why not) and which Prometheus registry to
expose; this module only serves them on ``bind``:``port`` (0 picks a free
port; :attr:`url` tells where once started).
"""

from __future__ import annotations

from typing import Any, Callable

from aiohttp import web

__all__ = ["HealthServer"]


class HealthServer:
    def __init__(self, *, registry: Any, ready: Callable[[], str | None], bind: str = "127.0.0.1", port: int = 0) -> None:
        self._registry = registry
        self._ready = ready
        self.bind = bind
        self.port = port
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/livez", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
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
        why = self._ready()
        return web.Response(text="ok") if why is None else web.Response(status=503, text=why)

    async def _metrics(self, request: web.Request) -> web.Response:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return web.Response(body=generate_latest(self._registry), headers={"Content-Type": CONTENT_TYPE_LATEST})
