"""``nodes/NAME/proxy/PATH``: an HTTP proxy to the node's kubelet.

What ``kubectl get --raw /api/v1/nodes/N/proxy/stats/summary`` and
metrics-server-style scrapers use. ``NAME`` may carry a port
(``nodes/N:10255/proxy``) to reach another port on the node's address. The
method, query, body and end-to-end headers go through; the answer is
streamed back as it arrives (a ``containerLogs?follow=true`` stays open).
"""

from __future__ import annotations

from aiohttp import web

from k8py.apiserver.streaming.http_relay import relay
from k8py.apiserver.streaming.kubelet_client import KubeletClient, KubeletLocation

__all__ = ["serve_node_proxy"]


async def serve_node_proxy(request: web.Request, kubelets: KubeletClient, node: str, path: str) -> web.StreamResponse:
    name, _, port = node.partition(":")
    where = await kubelets.for_node(name)
    if port:
        where = KubeletLocation(where.node, where.host, int(port) if port.isdigit() else where.port)
    return await relay(request, kubelets.session, f"{where.base_url}/{path}",
                       unreachable=f"cannot reach the kubelet of node {name!r} at {where.base_url}", hint=": is it running?")
