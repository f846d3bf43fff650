"""``pods/exec``, ``pods/attach`` and ``pods/portforward``: checked here, served by the kubelet.

Upstream ``pkg/registry/core/pod/strategy.go`` (``ExecLocation``,
``AttachLocation``, ``PortForwardLocation``): the pod must be bound, the
container resolved; the options are mapped onto the kubelet's query names
(``stdin`` → ``input``, ``stdout`` → ``output``, ``stderr`` → ``error``,
``tty``, ``command`` repeated; ``port`` repeated for port-forward) and the
stream is relayed (:mod:`.websocket_relay`).

Kubelet paths: ``/exec/NS/POD/CONTAINER``, ``/attach/NS/POD/CONTAINER``,
``/portForward/NS/POD``.
"""

from __future__ import annotations

from urllib.parse import quote

from aiohttp import web

from k8py.api.errors import BadRequest, Cause, Invalid
from k8py.api.stream_channels import PORTFORWARD_PROTOCOLS, REMOTECOMMAND_PROTOCOLS, TUNNEL_PORTFORWARD, query_flag
from k8py.apiserver.streaming.kubelet_client import KubeletClient, pod_container
from k8py.apiserver.streaming.websocket_relay import relay_websocket

__all__ = ["serve_exec", "serve_attach", "serve_portforward"]

_STREAM_PARAMS = (("stdin", "input"), ("stdout", "output"), ("stderr", "error"), ("tty", "tty"))


def _stream_params(request: web.Request) -> list[tuple[str, str]]:
    out = []
    for ours, kubelets in _STREAM_PARAMS:
        if query_flag(request.query.get(ours, "")):
            out.append((kubelets, "1"))
    if not any(k in ("input", "output", "error") for k, _ in out):
        raise BadRequest("you must specify at least 1 of stdin, stdout, stderr")
    return out


async def serve_exec(request: web.Request, kubelets: KubeletClient, namespace: str, name: str) -> web.StreamResponse:
    command = request.query.getall("command", [])
    params = _stream_params(request)
    if not command:
        raise BadRequest("you must specify at least one command for the container")
    pod, where = await kubelets.for_pod(namespace, name)
    container = pod_container(pod, request.query.get("container", ""))
    params += [("command", c) for c in command]
    url = f"{where.base_url}/exec/{quote(namespace)}/{quote(name)}/{quote(container)}"
    return await relay_websocket(request, kubelets, url, params, REMOTECOMMAND_PROTOCOLS, what="exec", unnamed=True,
                                 hold_until_pong=True)


async def serve_attach(request: web.Request, kubelets: KubeletClient, namespace: str, name: str) -> web.StreamResponse:
    params = _stream_params(request)
    pod, where = await kubelets.for_pod(namespace, name)
    container = pod_container(pod, request.query.get("container", ""))
    url = f"{where.base_url}/attach/{quote(namespace)}/{quote(name)}/{quote(container)}"
    return await relay_websocket(request, kubelets, url, params, REMOTECOMMAND_PROTOCOLS, what="attach", unnamed=True,
                                 hold_until_pong=True)


async def serve_portforward(request: web.Request, kubelets: KubeletClient, namespace: str, name: str) -> web.StreamResponse:
    ports = []
    for value in request.query.getall("ports", []) + request.query.getall("port", []):
        for part in value.split(","):
            try:
                port = int(part)
            except ValueError:
                port = 0
            if not 1 <= port <= 65535:
                raise Invalid.for_object(
                    "PodPortForwardOptions", name, [Cause("FieldValueInvalid", f"Invalid value: \"{part}\": port must be between 1 and 65535", "ports")]
                )
            ports.append(port)
    _, where = await kubelets.for_pod(namespace, name)
    url = f"{where.base_url}/portForward/{quote(namespace)}/{quote(name)}"
    params = [("port", str(p)) for p in ports]
    return await relay_websocket(
        request, kubelets, url, params, (TUNNEL_PORTFORWARD, *PORTFORWARD_PROTOCOLS), what="port-forward",
        unnamed=True,
    )
