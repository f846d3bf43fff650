"""``/healthz``, ``/livez``, ``/readyz`` and ``/metrics`` for a component process.

Every component (controller manager, scheduler, proxy, DNS) serves the same
four paths, as component-base does for upstream's. Kept apart from what is
served: the component says whether it is healthy and ready (a callable that
returns None, or why not) and how to render its metrics; this module only
serves them on ``bind``:``port`` (0 picks a free port; :attr:`url` and
:attr:`port` tell where once started).

A failed check answers as the Kubernetes components do: ``/healthz`` 500 and
``/readyz`` 503, with ``[-]<why>`` and ``<check> check failed`` in the body.
"""

from __future__ import annotations

from typing import Any, Callable

from aiohttp import web

__all__ = ["HealthServer", "prometheus_text"]

Check = Callable[[], "str | None"]


def _ok() -> str | None:
    return None


def prometheus_text(registry: Any) -> Callable[[], bytes]:
    """A metrics renderer for a ``prometheus_client`` registry."""
    from prometheus_client import generate_latest

    return lambda: generate_latest(registry)


class HealthServer:
    def __init__(self, *, metrics: Callable[[], bytes], ready: Check = _ok, healthy: Check = _ok,
                 bind: str = "127.0.0.1", port: int = 0) -> None:
        self._metrics = metrics
        self._ready = ready
        self._healthy = healthy
        self.bind = bind
        self.port = port
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/livez", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._render_metrics)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.bind, self.port)
        await site.start()
        server = site._server  # aiohttp exposes the bound socket only here
        if server is not None and getattr(server, "sockets", None):
            self.port = server.sockets[0].getsockname()[1]
        host = f"[{self.bind}]" if ":" in self.bind else self.bind
        self.url = f"http://{host}:{self.port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @staticmethod
    def _answer(check: Check, name: str, failed_status: int) -> web.Response:
        problem = check()
        if problem:
            return web.Response(status=failed_status, text=f"[-]{problem}\n{name} check failed\n")
        return web.Response(text="ok")

    async def _healthz(self, request: web.Request) -> web.Response:
        return self._answer(self._healthy, request.path.lstrip("/"), 500)

    async def _readyz(self, request: web.Request) -> web.Response:
        return self._answer(self._ready, "readyz", 503)

    async def _render_metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self._metrics(), content_type="text/plain", charset="utf-8",
                            headers={"X-Content-Type-Options": "nosniff"})
