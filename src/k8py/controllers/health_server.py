"""The controller manager's HTTP endpoints: ``/healthz`` and ``/metrics``.

Kept apart from what is served: the manager decides what healthy means
(``healthy()``), this module only serves it on loopback (or ``bind``), on
``port`` (0 picks a free one; :attr:`HealthServer.port` tells which).
``/metrics`` is the Prometheus text format of the manager's own registry
(the ``workqueue_*`` families, one ``name`` label per controller queue).
"""

from __future__ import annotations

from typing import Any, Callable

from aiohttp import web

__all__ = ["HealthServer"]


class HealthServer:
    def __init__(self, *, registry: Any, healthy: Callable[[], bool], bind: str = "127.0.0.1", port: int = 0) -> None:
        self._registry = registry
        self._healthy = healthy
        self.bind = bind
        self.port = port
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/livez", self._healthz)
        app.router.add_get("/readyz", self._healthz)
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.bind, self.port)
        await site.start()
        server = site._server  # aiohttp exposes the bound socket only here
        if server is not None and getattr(server, "sockets", None):
            self.port = server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _healthz(self, request: web.Request) -> web.Response:
        if self._healthy():
            return web.Response(text="ok")
        return web.Response(status=500, text="unhealthy")

    async def _metrics(self, request: web.Request) -> web.Response:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        body = generate_latest(self._registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
