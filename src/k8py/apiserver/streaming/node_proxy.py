"""``nodes/NAME/proxy/PATH``: an HTTP proxy to the node's kubelet.

What ``kubectl get --raw /api/v1/nodes/N/proxy/stats/summary`` and
metrics-server-style scrapers use. ``NAME`` may carry a port
(``nodes/N:10255/proxy``) to reach another port on the node's address. The
method, query, body and end-to-end headers go through; the answer is
streamed back as it arrives (a ``containerLogs?follow=true`` stays open).
"""

from __future__ import annotations

import logging

import aiohttp
from aiohttp import web

from k8py.api.errors import ServiceUnavailable
from k8py.apiserver.streaming.kubelet_client import KubeletClient, KubeletLocation

__all__ = ["serve_node_proxy"]

log = logging.getLogger(__name__)

#: hop-by-hop headers (RFC 9110 7.6.1) and those aiohttp sets itself
_DROP = frozenset(
    h.lower()
    for h in (
        "Connection",
        "Keep-Alive",
        "Proxy-Authenticate",
        "Proxy-Authorization",
        "TE",
        "Trailer",
        "Transfer-Encoding",
        "Upgrade",
        "Host",
        "Content-Length",
        "Authorization",
    )
)


async def serve_node_proxy(request: web.Request, kubelets: KubeletClient, node: str, path: str) -> web.StreamResponse:
    name, _, port = node.partition(":")
    where = await kubelets.for_node(name)
    if port:
        where = KubeletLocation(where.node, where.host, int(port) if port.isdigit() else where.port)
    url = f"{where.base_url}/{path}"
    headers = {k: v for k, v in request.headers.items() if k.lower() not in _DROP}
    body = await request.read() if request.can_read_body else None
    try:
        upstream = await kubelets.session.request(
            request.method, url, params=request.query, headers=headers, data=body, allow_redirects=False
        )
    except (aiohttp.ClientError, OSError) as err:
        raise ServiceUnavailable(f"cannot reach the kubelet of node {name!r} at {where.base_url} ({err}): is it running?") from None
    try:
        response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
        for key, value in upstream.headers.items():
            if key.lower() not in _DROP:
                response.headers.add(key, value)
        await response.prepare(request)
        try:
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
        except (ConnectionError, aiohttp.ClientConnectionError):
            log.debug("node proxy stream ended early", extra={"node": name})
        return response
    finally:
        upstream.release()
