"""The kubelet's HTTP server (owned by the streaming work; this is the seed).

:func:`build_app` is the contract: given a
:class:`~k8py.kubelet.server_context.ServerContext`, return the aiohttp
application the kubelet serves on its port (``daemonEndpoints.kubeletEndpoint``).
This seed serves only /healthz and /metrics; logs, exec, attach,
port-forward and stats are added here by the streaming work.
"""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from k8py.kubelet.server_context import ServerContext

__all__ = ["build_app"]


def build_app(ctx: ServerContext) -> web.Application:
    app = web.Application()

    async def healthz(_: web.Request) -> web.Response:
        if ctx.healthy():
            return web.Response(text="ok")
        return web.Response(status=500, text="unhealthy")

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=generate_latest(ctx.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics)
    return app
