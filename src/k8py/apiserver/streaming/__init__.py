"""The subresources the kubelet serves, and the metrics API that asks the kubelets.

The API server holds no container state: a pod's logs, exec, attach and
port-forward streams and a node's ``proxy`` are answered by the kubelet
running it, found from the Node object (:mod:`.kubelet_client`). This package
checks each request as upstream's pod REST storage does, then relays:

- ``pods/log``          → :mod:`.pod_log`      (HTTP, streamed)
- ``pods/exec|attach``  → :mod:`.pod_streams`  (WebSocket, v5/v4.channel.k8s.io)
- ``pods/portforward``  → :mod:`.pod_streams`  (WebSocket; SPDY tunnelled by kubectl)
- ``nodes/proxy/...``   → :mod:`.node_proxy`   (HTTP, relayed by :mod:`.http_relay`)
- ``pods/proxy/...``, ``services/proxy/...`` → :mod:`.service_proxy` (HTTP, to the pod
  or one endpoint of the Service)
- ``metrics.k8s.io``    → :mod:`.resource_metrics` (NodeMetrics / PodMetrics from
  each kubelet's ``/metrics/resource``, as metrics-server computes them)

:func:`serve_subresource` is the entry the generic handlers call for these
subresources; every path returns a response or raises a Status error.
"""

from __future__ import annotations

from typing import Mapping

from aiohttp import web

from k8py.api.errors import MethodNotAllowed, NotFound
from k8py.apiserver.streaming.kubelet_client import KubeletClient
from k8py.apiserver.streaming.node_proxy import serve_node_proxy
from k8py.apiserver.streaming.pod_log import serve_pod_log
from k8py.apiserver.streaming.pod_streams import serve_attach, serve_exec, serve_portforward
from k8py.apiserver.streaming.resource_metrics import ResourceMetrics
from k8py.apiserver.streaming.service_proxy import serve_pod_proxy, serve_service_proxy

__all__ = ["KUBELETS", "RESOURCE_METRICS", "KubeletClient", "ResourceMetrics", "serve_subresource", "POD_SUBRESOURCES", "NODE_SUBRESOURCES", "is_streaming"]

#: where the API server's application keeps its KubeletClient
KUBELETS = web.AppKey("k8py.kubelets", KubeletClient)
#: and its metrics.k8s.io service
RESOURCE_METRICS = web.AppKey("k8py.resource-metrics", ResourceMetrics)

POD_SUBRESOURCES = frozenset({"log", "exec", "attach", "portforward"})
NODE_SUBRESOURCES = frozenset({"proxy"})


def is_streaming(plural: str, group: str, subresource: str) -> bool:
    if group:
        return False
    head = subresource.split("/", 1)[0]
    return (plural == "pods" and (subresource in POD_SUBRESOURCES or head == "proxy")) or \
        (plural in ("nodes", "services") and head in NODE_SUBRESOURCES)


async def serve_subresource(
    request: web.Request,
    kubelets: KubeletClient,
    *,
    plural: str,
    namespace: str,
    name: str,
    subresource: str,
    params: Mapping[str, str],
) -> web.StreamResponse:
    method = request.method
    if plural in ("pods", "services") and subresource.split("/", 1)[0] == "proxy":
        path = subresource[len("proxy/") :] if "/" in subresource else ""
        serve = serve_pod_proxy if plural == "pods" else serve_service_proxy
        return await serve(request, kubelets, namespace, name, path)
    if plural == "pods":
        if subresource == "log":
            if method != "GET":
                raise MethodNotAllowed(f"{method} is not supported on pods/log")
            return await serve_pod_log(request, kubelets, namespace, name, params)
        if method not in ("GET", "POST"):
            raise MethodNotAllowed(f"{method} is not supported on pods/{subresource}")
        if subresource == "exec":
            return await serve_exec(request, kubelets, namespace, name)
        if subresource == "attach":
            return await serve_attach(request, kubelets, namespace, name)
        if subresource == "portforward":
            return await serve_portforward(request, kubelets, namespace, name)
    if plural == "nodes" and subresource.split("/", 1)[0] == "proxy":
        path = subresource[len("proxy/") :] if "/" in subresource else ""
        return await serve_node_proxy(request, kubelets, name, path)
    raise NotFound("the server could not find the requested resource")
