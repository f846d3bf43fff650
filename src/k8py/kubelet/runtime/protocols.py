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

:class:`Runtime` is the union the kubelet is given.

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
import enum
import os
from dataclasses import dataclass, field
from typing import AsyncIterator, Mapping, Protocol, Sequence, runtime_checkable

__all__ = [
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


class ContainerState(str, enum.Enum):
    """CRI's ``ContainerState``."""

    CREATED = "CONTAINER_CREATED"
    RUNNING = "CONTAINER_RUNNING"
    EXITED = "CONTAINER_EXITED"
    UNKNOWN = "CONTAINER_UNKNOWN"


class SandboxState(str, enum.Enum):
    """CRI's ``PodSandboxState``."""

    READY = "SANDBOX_READY"
    NOTREADY = "SANDBOX_NOTREADY"


@dataclass(frozen=True)
class Mount:
    """A host path shown to the container at ``container_path`` (CRI ``Mount``)."""

    container_path: str
    host_path: str
    readonly: bool = False
    #: the volume's name in the pod spec (for diagnostics only)
    volume: str = ""


@dataclass(frozen=True)
class Resources:
    """The Linux resources CRI passes (``LinuxContainerResources``); 0 = unset.

    ``cpu_quota``/``cpu_period`` in microseconds, ``memory_limit`` in bytes.
    A runtime that cannot enforce them records them and says so in
    :attr:`RuntimeInfo.enforces_limits`.
    """

    cpu_quota: int = 0
    cpu_period: int = 100_000
    cpu_shares: int = 0
    memory_limit: int = 0
    #: pids.max (pod level: the kubelet's podPidsLimit)
    pids_limit: int = 0


@dataclass(frozen=True)
class PodSandboxConfig:
    """What the kubelet asks for when it starts a pod (CRI ``PodSandboxConfig``)."""

    name: str
    namespace: str
    uid: str
    attempt: int = 0
    hostname: str = ""
    #: absolute directory where the pod's container logs go (:func:`pod_log_directory`)
    log_directory: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    #: the pod uses the node's address (``spec.hostNetwork``)
    host_network: bool = False
    #: container ports the pod declares, as (protocol, port) — for runtimes that map them
    ports: Sequence[tuple[str, int]] = ()
    #: the ports with a hostPort, as (protocol, containerPort, hostPort, hostIP) — CRI ``PortMapping``
    port_mappings: Sequence[tuple[str, int, int, str]] = ()
    #: the pod's cgroup below the runtime's k8py parent, by QoS class as upstream
    #: (``kubepods/burstable/pod<uid>``); "" = no pod cgroup
    cgroup_parent: str = ""
    #: pod-level limits for that cgroup (CRI ``LinuxPodSandboxConfig.resources``)
    resources: Resources = field(default_factory=Resources)


@dataclass(frozen=True)
class PodSandboxStatus:
    id: str
    name: str
    namespace: str
    uid: str
    attempt: int
    state: SandboxState
    created_at: float
    #: the pod's IP (``status.podIP``); "" until the network is set up
    ip: str = ""
    additional_ips: Sequence[str] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ContainerConfig:
    """One container to create in a sandbox (CRI ``ContainerConfig``).

    ``command``/``args`` are the pod spec's, with ``$(VAR)`` already expanded
    by the kubelet; the runtime combines them with the image's entrypoint the
    way the image config would (see the runtime's image catalog).
    """

    name: str
    image: str
    attempt: int = 0
    command: Sequence[str] = ()
    args: Sequence[str] = ()
    working_dir: str = ""
    env: Sequence[tuple[str, str]] = ()
    mounts: Sequence[Mount] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    #: relative to the sandbox's log_directory, e.g. ``web/0.log``
    log_path: str = ""
    stdin: bool = False
    stdin_once: bool = False
    tty: bool = False
    resources: Resources = field(default_factory=Resources)
    #: securityContext (the container's over the pod's): they override the image's User
    run_as_user: int | None = None
    run_as_group: int | None = None
    run_as_non_root: bool = False
    #: the pod's supplementalGroups, then its fsGroup (CRI ``supplemental_groups``)
    supplemental_groups: Sequence[int] = ()
    #: securityContext.capabilities, as written in the spec (``NET_ADMIN``, ``ALL``)
    capabilities_add: Sequence[str] = ()
    capabilities_drop: Sequence[str] = ()
    privileged: bool = False
    readonly_rootfs: bool = False
    #: ``allowPrivilegeEscalation: false``
    no_new_privs: bool = False
    #: ephemeral containers: the container whose namespaces this one joins (``targetContainerName``)
    target_container_id: str = ""


@dataclass(frozen=True)
class ContainerStatus:
    """CRI ``ContainerStatus``: what the kubelet turns into ``containerStatuses[]``."""

    id: str
    sandbox_id: str
    name: str
    attempt: int
    state: ContainerState
    image: str
    #: the resolved image (``imageID`` in the pod status)
    image_ref: str = ""
    created_at: float = 0.0
    started_at: float = 0.0
    finished_at: float = 0.0
    exit_code: int = 0
    #: for EXITED: ``Completed``, ``Error``, ``OOMKilled``, ``ContainerCannotRun`` …
    reason: str = ""
    message: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    #: absolute path of the CRI-format log file (see the module docstring)
    log_path: str = ""
    #: host pid of the container's main process while it runs (0 otherwise);
    #: a k8py extension, used for /proc-based stats
    pid: int = 0


class ContainerEventType(str, enum.Enum):
    """CRI's ``ContainerEventType`` (``GetContainerEvents``)."""

    CREATED = "CONTAINER_CREATED_EVENT"
    STARTED = "CONTAINER_STARTED_EVENT"
    STOPPED = "CONTAINER_STOPPED_EVENT"
    DELETED = "CONTAINER_DELETED_EVENT"


@dataclass(frozen=True)
class ContainerEvent:
    """One lifecycle change, pushed by the runtime the moment it sees it."""

    type: ContainerEventType
    container_id: str
    sandbox_id: str
    #: the pod's UID (the sandbox config's ``uid``)
    pod_uid: str
    at: float


@dataclass(frozen=True)
class ExecSpec:
    """How to start a process inside a running container.

    ``argv`` is complete (it already enters the container's namespaces and
    mounts where the runtime uses them); spawn it with ``env`` and ``cwd`` and
    whatever stdio you need (pipes, or a pty for ``tty``).
    """

    argv: Sequence[str]
    env: Mapping[str, str]
    cwd: str


@dataclass(frozen=True)
class ExecResult:
    exit_code: int
    stdout: bytes
    stderr: bytes
    timed_out: bool = False


@dataclass(frozen=True)
class AuthConfig:
    """A registry credential for one pull (CRI ``AuthConfig``): from a pull secret or the node."""

    username: str
    password: str
    #: where it came from, for messages ("secret default/regcred", "node /…/config.json")
    source: str = ""

    def __repr__(self) -> str:  # never print the password
        return f"AuthConfig(username={self.username!r}, source={self.source!r})"


@dataclass(frozen=True)
class ImageSpec:
    image: str
    #: credentials to try in order for a pull (CRI passes one per PullImage; the kubelet
    #: loops over them, here the runtime does); empty: anonymous
    auth: Sequence[AuthConfig] = ()


@dataclass(frozen=True)
class Image:
    """CRI ``Image``: the node lists these in ``status.images``."""

    id: str
    repo_tags: Sequence[str]
    repo_digests: Sequence[str] = ()
    size: int = 0


@dataclass(frozen=True)
class RuntimeInfo:
    """CRI ``VersionResponse`` plus what the kubelet needs to report honestly."""

    name: str
    version: str
    #: whether Resources limits are enforced (cgroups) or only recorded
    enforces_limits: bool = False
    #: one line saying how containers are isolated (for logs and docs)
    isolation: str = ""


class NotFoundError(LookupError):
    """The sandbox, container or image does not exist (CRI NotFound)."""


class RuntimeErrorStatus(RuntimeError):
    """The runtime could not do what was asked.

    ``reason`` is what the kubelet shows as a waiting reason or an Event
    reason (``ErrImagePull``, ``RunContainerError``, ``CreateContainerError``).
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


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


@dataclass(frozen=True)
class ContainerUsage:
    """CRI ``ContainerStats``, reduced to what the resource metrics need."""

    container_id: str
    #: cumulative CPU time in core-seconds
    cpu_seconds: float
    #: memory working set in bytes
    memory_bytes: int
    #: when the runtime measured it (Unix seconds)
    timestamp: float


@dataclass(frozen=True)
class InterfaceUsage:
    """One network interface of a pod (CRI ``NetworkInterfaceUsage``): cumulative counters."""

    name: str
    rx_bytes: int
    tx_bytes: int
    rx_errors: int = 0
    tx_errors: int = 0


@dataclass(frozen=True)
class PodNetworkUsage:
    """CRI ``PodSandboxStats``' network part: the pod's default interface first, then the others."""

    pod_uid: str
    timestamp: float
    interfaces: Sequence[InterfaceUsage]


@runtime_checkable
class StatsRuntime(Protocol):
    """A runtime that measures its containers (CRI ``ListContainerStats``) rather than the kubelet reading /proc,
    and its pods' networks (``ListPodSandboxStats``)."""

    async def list_container_stats(self) -> Sequence[ContainerUsage]: ...

    async def list_pod_network_stats(self) -> Sequence[PodNetworkUsage]: ...


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


def pod_log_directory(root: str, namespace: str, name: str, uid: str) -> str:
    """Upstream's ``/var/log/pods/<namespace>_<name>_<uid>`` under ``root``."""
    return os.path.join(root, f"{namespace}_{name}_{uid}")


def container_log_path(log_directory: str, container: str, attempt: int) -> str:
    """Upstream's ``<pod log dir>/<container>/<restartCount>.log``."""
    return os.path.join(log_directory, container, f"{attempt}.log")
