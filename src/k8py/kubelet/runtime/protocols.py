"""The container runtime as the kubelet sees it: CRI-shaped role protocols.

Upstream's kubelet talks to its runtime through the CRI (``RuntimeService``
and ``ImageService`` in ``cri-api``). k8py keeps that cut so that a remote
CRI runtime (containerd over gRPC, a later issue) fits behind the same
protocols unchanged. The roles are separate small protocols, as CRI's are:

- :class:`SandboxRuntime` — the pod's sandbox (CRI ``RunPodSandbox`` …): the
  shared context of a pod's containers; it owns the pod's IP;
- :class:`ContainerRuntime` — containers inside a sandbox (``CreateContainer``,
  ``StartContainer`` …) and a pid-level event stream for the PLEG;
- :class:`StreamingRuntime` — exec, attach and port-forward (CRI hands out a
  streaming URL; k8py's kubelet server calls these directly);
- :class:`ImageRuntime` — image pull/status/list/remove.

:class:`Runtime` is the union the kubelet is given. The values these protocols
exchange (CRI's messages) live in :mod:`k8py.kubelet.runtime.messages` and
are re-exported here.

Invariants every implementation keeps:

- Identifiers are opaque strings chosen by the runtime; the kubelet never
  parses them. ``ContainerStatus.id`` is what ``status.containerStatuses[].
  containerID`` shows after the ``<runtime>://`` prefix (:attr:`RuntimeInfo.name`).
- Times are Unix seconds (floats, UTC). ``0.0`` means "not yet".
- A container's log is written by the runtime, never by the kubelet, to
  ``ContainerStatus.log_path``: the CRI log format, one line per record,
  ``<RFC3339Nano timestamp> <stdout|stderr> <F|P> <content>``, where ``P``
  marks a partial line (the rest follows in the next record) and ``F`` a full
  one. The path is :func:`container_log_path` (upstream's layout). Rotated
  files sit beside it as ``<attempt>.log.<YYYYMMDD-HHMMSS>`` (newest last).
- Methods that find nothing raise :class:`NotFoundError`; a runtime that
  cannot do what is asked raises :class:`RuntimeErrorStatus` with a CRI-ish
  reason the kubelet can show (``ErrImagePull``, ``RunContainerError`` …).
- Nothing here blocks the event loop: every method is a coroutine, or cheap.
"""

from __future__ import annotations

import asyncio
from typing import AsyncIterator, Protocol, Sequence, runtime_checkable

from .messages import (
    ContainerState,
    SandboxState,
    Mount,
    Resources,
    PodSandboxConfig,
    PodSandboxStatus,
    ContainerConfig,
    ContainerStatus,
    ContainerEvent,
    ContainerEventType,
    ExecSpec,
    ExecResult,
    AuthConfig,
    ImageSpec,
    Image,
    RuntimeInfo,
    ContainerUsage,
    InterfaceUsage,
    PodNetworkUsage,
    NotFoundError,
    RuntimeErrorStatus,
    pod_log_directory,
    container_log_path,
)

__all__ = [
    "HealthRuntime",
    "ImageFilesystemRuntime",
    "ContainerState",
    "SandboxState",
    "Mount",
    "Resources",
    "PodSandboxConfig",
    "PodSandboxStatus",
    "ContainerConfig",
    "ContainerStatus",
    "ContainerEvent",
    "ContainerEventType",
    "ExecSpec",
    "ExecResult",
    "AuthConfig",
    "ImageSpec",
    "Image",
    "RuntimeInfo",
    "SandboxRuntime",
    "ContainerRuntime",
    "StreamingRuntime",
    "ImageRuntime",
    "Runtime",
    "ContainerTerminal",
    "StdinOnceRuntime",
    "TerminalRuntime",
    "RemoteStream",
    "RemoteStreamingRuntime",
    "ContainerUsage",
    "InterfaceUsage",
    "PodNetworkUsage",
    "StatsRuntime",
    "NotFoundError",
    "RuntimeErrorStatus",
    "pod_log_directory",
    "container_log_path",
]



@runtime_checkable
class SandboxRuntime(Protocol):
    async def update_runtime_config(self, *, pod_cidr: str) -> None:
        """CRI ``UpdateRuntimeConfig``: the node's pod CIDR, from which pod IPs come."""

    async def run_pod_sandbox(self, config: PodSandboxConfig) -> str:
        """Create and start the sandbox; returns its id. The IP is assigned here."""

    async def stop_pod_sandbox(self, sandbox_id: str) -> None:
        """Stop every container in it and release its network; idempotent."""

    async def remove_pod_sandbox(self, sandbox_id: str) -> None:
        """Remove it and its containers; idempotent."""

    async def pod_sandbox_status(self, sandbox_id: str) -> PodSandboxStatus: ...

    async def list_pod_sandboxes(self) -> Sequence[PodSandboxStatus]: ...


@runtime_checkable
class ContainerRuntime(Protocol):
    async def create_container(self, sandbox_id: str, config: ContainerConfig, sandbox: PodSandboxConfig) -> str:
        """Prepare the container (resolve the image, lay out mounts); returns its id."""

    async def start_container(self, container_id: str) -> None:
        """Start the created container's process; raises RuntimeErrorStatus
        (``RunContainerError``) if it cannot be started."""

    async def stop_container(self, container_id: str, timeout: float) -> None:
        """SIGTERM, wait up to ``timeout`` seconds, then SIGKILL; returns once it has exited."""

    async def remove_container(self, container_id: str) -> None: ...

    async def container_status(self, container_id: str) -> ContainerStatus: ...

    async def list_containers(self, sandbox_id: str | None = None) -> Sequence[ContainerStatus]: ...

    def container_events(self) -> AsyncIterator[ContainerEvent]:
        """Every lifecycle change as it happens (the PLEG's source). One consumer."""


@runtime_checkable
class StreamingRuntime(Protocol):
    async def exec_spec(self, container_id: str, cmd: Sequence[str], *, tty: bool = False) -> ExecSpec:
        """How to run ``cmd`` inside the running container (raises NotFoundError,
        or RuntimeErrorStatus if it is not running)."""

    async def exec_sync(self, container_id: str, cmd: Sequence[str], timeout: float) -> ExecResult:
        """CRI ``ExecSync`` (used by exec probes and hooks)."""

    async def port_forward_address(self, sandbox_id: str, port: int) -> tuple[str, int]:
        """Where a connection to the pod's ``port`` goes (host, port)."""

    def attach_fifo(self, container_id: str) -> str | None:
        """Path of the FIFO that feeds the container's stdin when the container
        was created with ``stdin=True``; None otherwise. Output to attach is
        the log file (follow it)."""


@runtime_checkable
class StdinOnceRuntime(Protocol):
    """A runtime that closes a ``stdinOnce`` container's stdin when the attach feeding it ends."""

    async def close_stdin(self, container_id: str) -> bool:
        """The attach's stdin ended (its client closed it, or went away). True: the container is
        ``stdinOnce`` and its stdin is closed now (EOF; no stdin for later attaches), so the
        attach streams on; False: nothing changes for the container, and the attach ends."""


class ContainerTerminal(Protocol):
    """The terminal of a running ``tty: true`` container (its pty's master side, kept by the runtime)."""

    def subscribe(self) -> AsyncIterator[bytes]:
        """The container's output from now on, raw, until its terminal closes."""

    async def write(self, data: bytes) -> None:
        """Typed input."""

    def resize(self, width: int, height: int) -> None: ...


@runtime_checkable
class TerminalRuntime(Protocol):
    """A runtime that allocates a pty for ``tty: true`` containers and lets attach use it."""

    def attach_terminal(self, container_id: str) -> ContainerTerminal | None:
        """None when the container has no terminal (no ``tty``, or one this runtime can no longer reach)."""


class RemoteStream(Protocol):
    """An exec or attach session the runtime serves itself (CRI's streaming server)."""

    def output(self) -> AsyncIterator[tuple[int, bytes]]:
        """(channel, bytes) on stdout (1) / stderr (2) until both have ended."""

    async def write_stdin(self, data: bytes) -> None: ...

    async def close_stdin(self) -> None: ...

    async def resize(self, width: int, height: int) -> None: ...

    async def status(self) -> bytes:
        """The ``Status`` JSON the runtime ends the session with (exit code, or why it failed)."""

    async def close(self) -> None: ...


@runtime_checkable
class RemoteStreamingRuntime(Protocol):
    """A runtime that streams exec, attach and port-forward itself (CRI ``Exec``/``Attach``/``PortForward``
    URLs): the kubelet's server relays its client to these instead of spawning ``exec_spec``."""

    async def exec_stream(self, container_id: str, cmd: Sequence[str], *, stdin: bool, stdout: bool, stderr: bool,
                          tty: bool) -> RemoteStream: ...

    async def attach_stream(self, container_id: str, *, stdin: bool, stdout: bool, stderr: bool, tty: bool) -> RemoteStream: ...

    async def port_forward_stream(self, sandbox_id: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """One TCP connection to ``port`` inside the pod's network namespace."""


@runtime_checkable
class StatsRuntime(Protocol):
    """A runtime that measures its containers (CRI ``ListContainerStats``) rather than the kubelet reading /proc,
    and its pods' networks (``ListPodSandboxStats``)."""

    async def list_container_stats(self) -> Sequence[ContainerUsage]: ...

    async def list_pod_network_stats(self) -> Sequence[PodNetworkUsage]: ...


@runtime_checkable
class HealthRuntime(Protocol):
    """A runtime that reports its own health (CRI ``Status``: RuntimeReady, NetworkReady), which the node's Ready
    condition follows as upstream's does; a runtime without it is healthy while the kubelet runs."""

    async def health_errors(self) -> list[str]:
        """Why the runtime is not ready (upstream's messages), or nothing."""


@runtime_checkable
class ImageFilesystemRuntime(Protocol):
    """A runtime whose images live on a filesystem of its own choosing (CRI ``ImageFsInfo``): the eviction
    manager's ``imagefs`` signals read that one instead of the kubelet's image store."""

    #: a path on the image filesystem ("" until the runtime said)
    image_fs_path: str


@runtime_checkable
class ImageRuntime(Protocol):
    async def pull_image(self, spec: ImageSpec) -> str:
        """Returns the image ref; raises RuntimeErrorStatus(``ErrImagePull``) or
        (``InvalidImageName``)."""

    async def image_status(self, spec: ImageSpec) -> Image | None:
        """The image if present on the node, else None."""

    async def list_images(self) -> Sequence[Image]: ...

    async def remove_image(self, spec: ImageSpec) -> None: ...


@runtime_checkable
class Runtime(SandboxRuntime, ContainerRuntime, StreamingRuntime, ImageRuntime, Protocol):
    """Everything the kubelet is given."""

    def info(self) -> RuntimeInfo: ...

    async def close(self) -> None:
        """Stop watching processes; containers keep running (adoption on restart)."""
