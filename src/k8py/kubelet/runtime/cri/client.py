"""An asyncio CRI v1 client: ``RuntimeService`` and ``ImageService`` over a unix socket.

The kubelet talks to containerd (or any CRI v1 runtime) through this. It is a
thin layer over the generated stubs: one channel, both services, each call
with a deadline, and gRPC failures turned into the errors the kubelet's
runtime protocols use (:class:`~k8py.kubelet.runtime.protocols.NotFoundError`
for ``NOT_FOUND``, :class:`CRIError` otherwise, carrying the gRPC code and the
runtime's message so the operator sees what containerd said).

Invariants:
- the endpoints are ``unix:///absolute/path.sock`` (upstream's
  ``--container-runtime-endpoint`` / ``--image-service-endpoint`` form);
  anything else is refused up front;
- calls never block the event loop (``grpc.aio``); cancellation propagates;
- :meth:`CRIClient.close` closes the channel; the client is an async context
  manager.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, AsyncIterator, Callable

import grpc
from grpc import aio

from k8py.kubelet.runtime.cri.api import runtime_v1_pb2 as pb
from k8py.kubelet.runtime.cri.api import runtime_v1_pb2_grpc as pb_grpc
from k8py.kubelet.runtime.protocols import NotFoundError

__all__ = ["CRIClient", "CRIError", "pb", "parse_endpoint"]

log = logging.getLogger(__name__)

#: the CRI API version the client speaks (VersionRequest.version)
API_VERSION = "v1"


class CRIError(RuntimeError):
    """A CRI call failed: ``code`` is the gRPC status code, ``details`` the runtime's message."""

    def __init__(self, method: str, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"CRI {method} failed ({code.name}): {details}")
        self.method = method
        self.code = code
        self.details = details


def parse_endpoint(endpoint: str) -> str:
    """Validate ``unix:///path`` and return the gRPC target for it."""
    if not endpoint.startswith("unix:///"):
        raise ValueError(f"container runtime endpoint {endpoint!r}: expected unix:///absolute/path/to/runtime.sock "
                         "(e.g. unix:///run/containerd/containerd.sock)")
    return endpoint


def _subscribe_request(filters: list[str]) -> bytes:
    """containerd's ``SubscribeRequest`` (``repeated string filters = 1``), encoded by hand: one field needs no stubs."""
    out = bytearray()
    for f in filters:
        data = f.encode()
        out.append(0x0A)  # field 1, length-delimited
        n = len(data)
        while n >= 0x80:
            out.append((n & 0x7F) | 0x80)
            n >>= 7
        out.append(n)
        out += data
    return bytes(out)


class CRIClient:
    """Both CRI services; every method is a coroutine taking and returning protobuf messages.

    ``image_endpoint`` (upstream's ``--image-service-endpoint``) puts the
    ImageService on a socket of its own; empty or equal to ``endpoint``, both
    services share one channel (upstream's default)."""

    def __init__(self, endpoint: str, *, image_endpoint: str = "", timeout: float = 120.0) -> None:
        self.endpoint = parse_endpoint(endpoint)
        self.image_endpoint = parse_endpoint(image_endpoint) if image_endpoint else self.endpoint
        self.timeout = timeout
        options = [("grpc.max_receive_message_length", 16 << 20)]
        self._channel = aio.insecure_channel(self.endpoint, options=options)
        self._image_channel = (self._channel if self.image_endpoint == self.endpoint
                               else aio.insecure_channel(self.image_endpoint, options=options))
        self._runtime = pb_grpc.RuntimeServiceStub(self._channel)
        self._images = pb_grpc.ImageServiceStub(self._image_channel)

    async def close(self) -> None:
        await self._channel.close()
        if self._image_channel is not self._channel:
            await self._image_channel.close()

    async def __aenter__(self) -> "CRIClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _call(self, stub: Any, method: str, request: Any, timeout: float | None) -> Any:
        try:
            return await getattr(stub, method)(request, timeout=timeout or self.timeout)
        except aio.AioRpcError as e:
            if e.code() == grpc.StatusCode.NOT_FOUND:
                raise NotFoundError(f"CRI {method}: {e.details()}") from e
            raise CRIError(method, e.code(), e.details() or "") from e

    # --- RuntimeService ---------------------------------------------------------------

    async def version(self, *, timeout: float | None = None) -> pb.VersionResponse:
        return await self._call(self._runtime, "Version", pb.VersionRequest(version=API_VERSION), timeout)

    async def status(self, *, verbose: bool = False, timeout: float | None = None) -> pb.StatusResponse:
        """The runtime's conditions (RuntimeReady, NetworkReady); ``verbose``: its ``info`` too (containerd: its config)."""
        return await self._call(self._runtime, "Status", pb.StatusRequest(verbose=verbose), timeout)

    async def update_runtime_config(self, pod_cidr: str, *, timeout: float | None = None) -> None:
        req = pb.UpdateRuntimeConfigRequest(runtime_config=pb.RuntimeConfig(network_config=pb.NetworkConfig(pod_cidr=pod_cidr)))
        await self._call(self._runtime, "UpdateRuntimeConfig", req, timeout)

    async def run_pod_sandbox(self, config: pb.PodSandboxConfig, *, runtime_handler: str = "",
                              timeout: float | None = None) -> str:
        req = pb.RunPodSandboxRequest(config=config, runtime_handler=runtime_handler)
        return (await self._call(self._runtime, "RunPodSandbox", req, timeout)).pod_sandbox_id

    async def stop_pod_sandbox(self, sandbox_id: str, *, timeout: float | None = None) -> None:
        await self._call(self._runtime, "StopPodSandbox", pb.StopPodSandboxRequest(pod_sandbox_id=sandbox_id), timeout)

    async def remove_pod_sandbox(self, sandbox_id: str, *, timeout: float | None = None) -> None:
        await self._call(self._runtime, "RemovePodSandbox", pb.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id), timeout)

    async def pod_sandbox_status(self, sandbox_id: str, *, timeout: float | None = None) -> pb.PodSandboxStatus:
        req = pb.PodSandboxStatusRequest(pod_sandbox_id=sandbox_id)
        return (await self._call(self._runtime, "PodSandboxStatus", req, timeout)).status

    async def list_pod_sandbox(self, *, timeout: float | None = None) -> list[pb.PodSandbox]:
        return list((await self._call(self._runtime, "ListPodSandbox", pb.ListPodSandboxRequest(), timeout)).items)

    async def create_container(self, sandbox_id: str, config: pb.ContainerConfig, sandbox_config: pb.PodSandboxConfig,
                               *, timeout: float | None = None) -> str:
        req = pb.CreateContainerRequest(pod_sandbox_id=sandbox_id, config=config, sandbox_config=sandbox_config)
        return (await self._call(self._runtime, "CreateContainer", req, timeout)).container_id

    async def start_container(self, container_id: str, *, timeout: float | None = None) -> None:
        await self._call(self._runtime, "StartContainer", pb.StartContainerRequest(container_id=container_id), timeout)

    async def stop_container(self, container_id: str, grace: int, *, timeout: float | None = None) -> None:
        req = pb.StopContainerRequest(container_id=container_id, timeout=grace)
        await self._call(self._runtime, "StopContainer", req, timeout or max(self.timeout, grace + 30))

    async def remove_container(self, container_id: str, *, timeout: float | None = None) -> None:
        await self._call(self._runtime, "RemoveContainer", pb.RemoveContainerRequest(container_id=container_id), timeout)

    async def list_containers(self, sandbox_id: str = "", *, timeout: float | None = None) -> list[pb.Container]:
        req = pb.ListContainersRequest(filter=pb.ContainerFilter(pod_sandbox_id=sandbox_id))
        return list((await self._call(self._runtime, "ListContainers", req, timeout)).containers)

    async def container_status(self, container_id: str, *, timeout: float | None = None) -> pb.ContainerStatus:
        req = pb.ContainerStatusRequest(container_id=container_id)
        return (await self._call(self._runtime, "ContainerStatus", req, timeout)).status

    async def reopen_container_log(self, container_id: str, *, timeout: float | None = None) -> None:
        """Make the runtime open the container's log path anew (after the kubelet renamed the file away)."""
        req = pb.ReopenContainerLogRequest(container_id=container_id)
        await self._call(self._runtime, "ReopenContainerLog", req, timeout)

    async def exec_sync(self, container_id: str, cmd: list[str], timeout_seconds: int, *,
                        timeout: float | None = None) -> pb.ExecSyncResponse:
        """Run ``cmd`` in the container; the runtime ends it after ``timeout_seconds`` (0: no limit)."""
        req = pb.ExecSyncRequest(container_id=container_id, cmd=cmd, timeout=timeout_seconds)
        return await self._call(self._runtime, "ExecSync", req, timeout or max(self.timeout, timeout_seconds + 30))

    async def exec(self, container_id: str, cmd: list[str], *, stdin: bool, stdout: bool, stderr: bool, tty: bool,
                   timeout: float | None = None) -> str:
        """A URL on the runtime's streaming server that runs ``cmd`` in the container once (CRI ``Exec``)."""
        req = pb.ExecRequest(container_id=container_id, cmd=cmd, stdin=stdin, stdout=stdout, stderr=stderr, tty=tty)
        return (await self._call(self._runtime, "Exec", req, timeout)).url

    async def attach(self, container_id: str, *, stdin: bool, stdout: bool, stderr: bool, tty: bool,
                     timeout: float | None = None) -> str:
        req = pb.AttachRequest(container_id=container_id, stdin=stdin, stdout=stdout, stderr=stderr, tty=tty)
        return (await self._call(self._runtime, "Attach", req, timeout)).url

    async def port_forward(self, sandbox_id: str, ports: list[int], *, timeout: float | None = None) -> str:
        req = pb.PortForwardRequest(pod_sandbox_id=sandbox_id, port=ports)
        return (await self._call(self._runtime, "PortForward", req, timeout)).url

    async def container_stats(self, container_id: str, *, timeout: float | None = None) -> pb.ContainerStats:
        req = pb.ContainerStatsRequest(container_id=container_id)
        return (await self._call(self._runtime, "ContainerStats", req, timeout)).stats

    async def list_container_stats(self, sandbox_id: str = "", *, timeout: float | None = None) -> list[pb.ContainerStats]:
        req = pb.ListContainerStatsRequest(filter=pb.ContainerStatsFilter(pod_sandbox_id=sandbox_id))
        return list((await self._call(self._runtime, "ListContainerStats", req, timeout)).stats)

    async def pod_sandbox_stats(self, sandbox_id: str, *, timeout: float | None = None) -> pb.PodSandboxStats:
        req = pb.PodSandboxStatsRequest(pod_sandbox_id=sandbox_id)
        return (await self._call(self._runtime, "PodSandboxStats", req, timeout)).stats

    async def list_pod_sandbox_stats(self, *, timeout: float | None = None) -> list[pb.PodSandboxStats]:
        req = pb.ListPodSandboxStatsRequest()
        return list((await self._call(self._runtime, "ListPodSandboxStats", req, timeout)).stats)

    async def container_events(self, *, on_open: Callable[[], None] | None = None,
                               open_grace: float = 1.0) -> AsyncIterator[pb.ContainerEventResponse]:
        """The runtime's container event stream (CRI ``GetContainerEvents``), without a deadline;
        ``on_open`` is called once the runtime has accepted the call: its response headers came, or the call is
        still open after ``open_grace`` seconds (containerd 1.7, a grpc-go server, sends its headers with the
        first event, which may be long in coming; a runtime without the stream refuses at once).

        Raises CRIError with ``UNIMPLEMENTED`` when the runtime has none (containerd before 1.7)."""
        call = self._runtime.GetContainerEvents(pb.GetEventsRequest())

        async def opened() -> None:
            headers = asyncio.ensure_future(call.initial_metadata())
            try:
                await asyncio.wait([headers], timeout=open_grace)
            finally:
                if headers.done() and not headers.cancelled():
                    headers.exception()  # a refusal is the stream's to raise; retrieved here so it is not logged
                headers.cancel()
            if on_open is not None and not call.done():
                on_open()

        watcher = asyncio.create_task(opened(), name="cri-events-opened")
        try:
            async for event in call:
                yield event
        except aio.AioRpcError as e:
            raise CRIError("GetContainerEvents", e.code(), e.details() or "") from e
        finally:
            call.cancel()
            watcher.cancel()

    async def containerd_task_events(self, namespace: str = "k8s.io") -> AsyncIterator[bytes]:
        """containerd's own event service (not CRI; ``containerd.services.events.v1.Events/Subscribe`` on the same
        socket): one raw envelope per task exit or OOM in ``namespace`` (the CRI plugin's). Only a signal that
        something changed; the envelopes are not decoded. Raises CRIError (``UNIMPLEMENTED`` from a runtime
        that is not containerd)."""
        subscribe = self._channel.unary_stream("/containerd.services.events.v1.Events/Subscribe")
        call = subscribe(_subscribe_request([f'namespace=={namespace},topic~="^/tasks/(exit|oom)$"']))
        try:
            async for envelope in call:
                yield envelope
        except aio.AioRpcError as e:
            raise CRIError("Events/Subscribe", e.code(), e.details() or "") from e
        finally:
            call.cancel()

    # --- ImageService -----------------------------------------------------------------

    async def pull_image(self, image: str, *, username: str = "", password: str = "",
                         sandbox_config: pb.PodSandboxConfig | None = None, timeout: float | None = None) -> str:
        req = pb.PullImageRequest(image=pb.ImageSpec(image=image))
        if username:
            req.auth.CopyFrom(pb.AuthConfig(username=username, password=password))
        if sandbox_config is not None:
            req.sandbox_config.CopyFrom(sandbox_config)
        return (await self._call(self._images, "PullImage", req, timeout)).image_ref

    async def image_status(self, image: str, *, timeout: float | None = None) -> pb.Image | None:
        """The image, or None when the runtime does not have it (CRI returns an empty image then)."""
        resp = await self._call(self._images, "ImageStatus", pb.ImageStatusRequest(image=pb.ImageSpec(image=image)), timeout)
        return resp.image if resp.HasField("image") and resp.image.id else None

    async def list_images(self, *, timeout: float | None = None) -> list[pb.Image]:
        return list((await self._call(self._images, "ListImages", pb.ListImagesRequest(), timeout)).images)

    async def remove_image(self, image: str, *, timeout: float | None = None) -> None:
        await self._call(self._images, "RemoveImage", pb.RemoveImageRequest(image=pb.ImageSpec(image=image)), timeout)

    async def image_fs_info(self, *, timeout: float | None = None) -> list[pb.FilesystemUsage]:
        """The filesystems holding the runtime's images (mountpoint, bytes and inodes the images use)."""
        return list((await self._call(self._images, "ImageFsInfo", pb.ImageFsInfoRequest(), timeout)).image_filesystems)
