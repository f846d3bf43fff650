"""The kubelet's HTTP server: logs, exec, attach, port-forward, stats, health.

:func:`build_app` is the contract with the kubelet core: given a
:class:`~k8py.kubelet.server_context.ServerContext`, return the aiohttp
application the kubelet serves on its port (``daemonEndpoints.kubeletEndpoint``).
The server owns no pod state; it reads the runtime and the kubelet's pods
through the context. Routes (upstream's paths):

- ``/healthz``, ``/metrics`` — health and the kubelet's own Prometheus registry;
- ``/pods`` — the pods bound to this node as the kubelet knows them (a PodList);
- ``/containerLogs/NS/POD/CONTAINER`` — :mod:`.container_logs` (CRI log files, :mod:`.cri_logs`);
- ``/exec/NS/POD/CONTAINER``, ``/attach/NS/POD/CONTAINER`` — :mod:`.remote_command`
  (WebSocket ``v5``/``v4.channel.k8s.io``; commands spawned by :mod:`.exec_process`), or, on a
  runtime that streams them itself (CRI), relayed to it by :mod:`.runtime_streams`;
- ``/portForward/NS/POD`` — :mod:`.port_forward` (WebSocket channels, or SPDY
  tunnelled in a WebSocket: :mod:`.spdy_port_forward`);
- ``/metrics/resource``, ``/stats/summary`` — :mod:`.resource_stats`.

The API server reaches these through ``pods/log|exec|attach|portforward`` and
``nodes/NAME/proxy/...``. Plain HTTP until the security issue brings TLS and
authentication (so bind it to the node's loopback or private address only).
"""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from k8py.kubelet.server.container_logs import container_logs_handler
from k8py.kubelet.server.port_forward import port_forward_handler
from k8py.kubelet.server.remote_command import attach_handler, exec_handler
from k8py.kubelet.runtime.protocols import RemoteStreamingRuntime
from k8py.kubelet.server.resource_stats import resource_metrics_handler, summary_handler
from k8py.kubelet.server.runtime_streams import remote_attach_handler, remote_exec_handler
from k8py.kubelet.server_context import ServerContext

__all__ = ["build_app"]


def build_app(ctx: ServerContext, *, poll_interval: float = 0.1, middlewares: tuple = ()) -> web.Application:  # type: ignore[type-arg]
    """``poll_interval``: how often a followed log (or an attach) looks for new output;
    ``middlewares``: e.g. the client-certificate check of :mod:`k8py.kubelet.server_tls`."""
    app = web.Application(middlewares=list(middlewares))

    async def healthz(_: web.Request) -> web.Response:
        if ctx.healthy():
            return web.Response(text="ok")
        return web.Response(status=500, text="unhealthy")

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=generate_latest(ctx.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def pods(_: web.Request) -> web.Response:
        # upstream's /pods: the pods this kubelet was given, as a PodList
        items = [dict(p) for p in ctx.pods.pods()]
        return web.json_response({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items})

    container = "/{namespace}/{pod}/{container}"
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/pods", pods)
    app.router.add_get("/metrics/resource", resource_metrics_handler(ctx))
    app.router.add_get("/stats/summary", summary_handler(ctx))
    app.router.add_get("/containerLogs" + container, container_logs_handler(ctx, poll_interval=poll_interval))
    if isinstance(ctx.runtime, RemoteStreamingRuntime):  # CRI: the runtime's streaming server runs the sessions
        exec_, attach = remote_exec_handler(ctx), remote_attach_handler(ctx)
    else:
        exec_, attach = exec_handler(ctx), attach_handler(ctx, poll_interval=poll_interval)
    for method in ("GET", "POST"):
        app.router.add_route(method, "/exec" + container, exec_)
        app.router.add_route(method, "/attach" + container, attach)
        app.router.add_route(method, "/portForward/{namespace}/{pod}", port_forward_handler(ctx))
    return app
