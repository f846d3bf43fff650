"""``pods/NAME/proxy/PATH`` and ``services/NAME/proxy/PATH``: HTTP proxied to a
pod, or to one of a Service's endpoints (what ``kubectl proxy`` and
``kubectl get --raw …/services/web:80/proxy/`` reach).

``NAME`` is upstream's ``[scheme:]name[:port]``:

- for a pod, ``port`` is a number or a container port's name (none: 80),
  and the pod must have an IP;
- for a Service, ``port`` is a Service port's name or number (none: the
  Service's only port). The API server picks one ready address of the
  Service's Endpoints at random and uses that endpoint's port, as upstream's
  ``ResourceLocation``; a Service without one is 503 ``no endpoints
  available for service "NAME"``.

The method, query, body and end-to-end headers go through; the answer is
streamed back as it arrives. Only ``http`` is spoken to pods (k8py pods
serve no TLS of their own).
"""

from __future__ import annotations

import logging
import random
from typing import Any

from aiohttp import web

from k8py.api.errors import BadRequest, NotFound, ServiceUnavailable
from k8py.apiserver.streaming.kubelet_client import KubeletClient
from k8py.apiserver.streaming.http_relay import relay

__all__ = ["serve_pod_proxy", "serve_service_proxy", "split_proxy_name"]

log = logging.getLogger(__name__)


def split_proxy_name(name: str) -> tuple[str, str, str]:
    """``[scheme:]name[:port]`` → (scheme, name, port)."""
    parts = name.split(":")
    if len(parts) == 1:
        return "", parts[0], ""
    if len(parts) == 2:
        return "", parts[0], parts[1]
    if len(parts) == 3:
        return parts[0], parts[1], parts[2]
    raise BadRequest(f"invalid proxy request name {name!r}: expected [scheme:]name[:port]")


def _container_port(pod: dict[str, Any], port: str) -> int:
    if not port:
        return 80
    if port.isdigit():
        return int(port)
    for container in (pod.get("spec") or {}).get("containers") or []:
        for p in container.get("ports") or []:
            if p.get("name") == port:
                return int(p["containerPort"])
    raise ServiceUnavailable(f'pod {pod["metadata"]["name"]} has no port named "{port}"')


async def serve_pod_proxy(request: web.Request, kubelets: KubeletClient, namespace: str, name: str, path: str) -> web.StreamResponse:
    scheme, pod_name, port = split_proxy_name(name)
    pod = await kubelets._get("pods", namespace, pod_name)
    ip = (pod.get("status") or {}).get("podIP")
    if not ip:
        raise ServiceUnavailable(f"pod {pod_name} has no IP yet: wait until it is running (kubectl get pod {pod_name} -o wide)")
    url = f"http://{ip}:{_container_port(pod, port)}/{path}"
    return await relay(request, kubelets.session, url, unreachable=f"error trying to reach pod {pod_name} at {url}")


def _service_port(service: dict[str, Any], port: str) -> dict[str, Any]:
    ports = (service.get("spec") or {}).get("ports") or []
    for p in ports:
        if (port and (p.get("name") == port or str(p.get("port")) == port)) or (not port and len(ports) == 1):
            return p
    name = service["metadata"]["name"]
    raise ServiceUnavailable(f'no service port "{port}" found for service "{name}"' if port else
                             f'service "{name}" has several ports: name one (services/{name}:PORT/proxy)')


async def serve_service_proxy(request: web.Request, kubelets: KubeletClient, namespace: str, name: str, path: str) -> web.StreamResponse:
    scheme, svc_name, port = split_proxy_name(name)
    service = await kubelets._get("services", namespace, svc_name)
    if (service.get("spec") or {}).get("type") == "ExternalName":
        raise BadRequest(f'services "{svc_name}" is of type ExternalName: it has no endpoints to proxy to')
    wanted = _service_port(service, port).get("name") or ""
    try:
        endpoints = await kubelets._get("endpoints", namespace, svc_name)
    except NotFound:
        endpoints = {}
    choices: list[tuple[str, int]] = []
    for subset in endpoints.get("subsets") or []:
        for p in subset.get("ports") or []:
            if (p.get("name") or "") == wanted:
                choices.extend((a["ip"], int(p["port"])) for a in subset.get("addresses") or [] if a.get("ip"))
    if not choices:
        raise ServiceUnavailable(f'no endpoints available for service "{svc_name}"')
    ip, target = random.choice(choices)
    url = f"http://{ip}:{target}/{path}"
    return await relay(request, kubelets.session, url, unreachable=f'error trying to reach service "{svc_name}" at {url}')

