"""Finding and talking to the kubelet that runs a pod (upstream ``pkg/kubelet/client``).

A pod's streams (logs, exec, attach, port-forward) and a node's proxy are
served by that node's kubelet; the API server only finds it and relays. The
kubelet is found from the Node object: the first address in the preferred
order (``InternalIP``, ``Hostname``, ``ExternalIP`` — loopback clusters
register InternalIPs) and ``status.daemonEndpoints.kubeletEndpoint.port``.
HTTPS when the server is given a kubelet client certificate or a kubelet
CA (``--kubelet-client-certificate``/``--kubelet-certificate-authority``, what
``k8py up`` sets): the kubelet is verified against that CA and shown the
client certificate. Without either, plain HTTP (standalone test kubelets).

:class:`KubeletClient` owns one ``aiohttp.ClientSession`` for all kubelet
traffic (created on first use inside the server's loop, closed by
``close()``); it holds no per-request state.
"""

from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp
import orjson

from k8py.api.errors import BadRequest, NotFound, ServiceUnavailable, StatusError, status_from_dict

__all__ = ["KubeletClient", "KubeletLocation", "ObjectGetter", "pod_container", "status_error_from_response"]

log = logging.getLogger(__name__)

Object = dict[str, Any]

#: the address types tried, in order (kube-apiserver --kubelet-preferred-address-types)
PREFERRED_ADDRESS_TYPES = ("InternalIP", "Hostname", "InternalDNS", "ExternalIP", "ExternalDNS")


class ObjectGetter(Protocol):
    """The one thing this module needs from the object store."""

    async def __call__(self, plural: str, namespace: str, name: str) -> Object: ...


@dataclass(frozen=True, slots=True)
class KubeletLocation:
    node: str
    host: str
    port: int
    scheme: str = "http"

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    @property
    def ws_base_url(self) -> str:
        return ("wss" if self.scheme == "https" else "ws") + self.base_url[len(self.scheme) :]


def node_location(node: Object, scheme: str = "http") -> KubeletLocation:
    name = (node.get("metadata") or {}).get("name", "")
    status = node.get("status") or {}
    port = (((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port")) or 0
    if not port:
        raise ServiceUnavailable(f"node {name!r} reports no kubelet port (status.daemonEndpoints.kubeletEndpoint.Port): is its kubelet running?")
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or [] if a.get("address")}
    for kind in PREFERRED_ADDRESS_TYPES:
        if kind in addresses:
            return KubeletLocation(name, addresses[kind], int(port), scheme)
    raise ServiceUnavailable(f"node {name!r} has no address to reach its kubelet: is its kubelet running?")


def pod_container(pod: Object, container: str, *, verb: str = "") -> str:
    """The container a request means: the one named (which must exist), or
    the pod's only container. Upstream's messages for a pod with several."""
    name = pod["metadata"]["name"]
    spec = pod.get("spec") or {}
    main = [c["name"] for c in spec.get("containers") or []]
    init = [c["name"] for c in spec.get("initContainers") or []]
    ephemeral = [c["name"] for c in spec.get("ephemeralContainers") or []]
    if container:
        if container in main or container in init or container in ephemeral:
            return container
        raise BadRequest(f"container {container} is not valid for pod {name}")
    if len(main) == 1:
        return main[0]
    message = f"a container name must be specified for pod {name}, choose one of: [{' '.join(main)}]"
    if init:
        message += f" or one of the init containers: [{' '.join(init)}]"
    if ephemeral:
        message += f" or one of the ephemeral containers: [{' '.join(ephemeral)}]"
    raise BadRequest(message)


async def status_error_from_response(response: aiohttp.ClientResponse) -> StatusError:
    """The kubelet's error answer as a Status error (its JSON Status, or its
    text as the message)."""
    body = await response.read()
    try:
        status = orjson.loads(body)
        if isinstance(status, dict) and status.get("kind") == "Status":
            return status_from_dict(status, response.status)
    except orjson.JSONDecodeError:
        pass
    text = body.decode("utf-8", "replace").strip() or response.reason or "error"
    err = status_from_dict({"message": text, "code": response.status}, response.status)
    return err


class KubeletClient:
    def __init__(self, get: ObjectGetter, *, timeout: float = 30.0, client_cert_file: str = "",
                 client_key_file: str = "", ca_file: str = "") -> None:
        self._get = get
        self._timeout = timeout
        self._session: aiohttp.ClientSession | None = None
        self._ssl: ssl.SSLContext | None = None
        self.scheme = "http"
        if client_cert_file or ca_file:
            self.scheme = "https"
            self._ssl = ssl.create_default_context(cafile=ca_file or None)
            # kubelets are reached by IP and their certificates name it; the
            # name check is the CA's word on that IP, as upstream
            if client_cert_file:
                self._ssl.load_cert_chain(client_cert_file, client_key_file or None)

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            # no total timeout: log follows and exec sessions last as long as the user wants
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=self._timeout),
                auto_decompress=False,
                connector=aiohttp.TCPConnector(ssl=self._ssl if self._ssl is not None else False),
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def for_node(self, node_name: str) -> KubeletLocation:
        try:
            node = await self._get("nodes", "", node_name)
        except NotFound:
            raise NotFound(f'nodes "{node_name}" not found', name=node_name, kind="nodes") from None
        return node_location(node, self.scheme)

    async def for_pod(self, namespace: str, name: str) -> tuple[Object, KubeletLocation]:
        pod = await self._get("pods", namespace, name)
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name:
            raise BadRequest(f"pod {name} does not have a host assigned")
        return pod, await self.for_node(node_name)
