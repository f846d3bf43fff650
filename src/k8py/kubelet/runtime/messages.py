"""The values the kubelet and its container runtime exchange: CRI's messages.

Upstream keeps the CRI's messages (``api.proto``: ``PodSandboxConfig``,
``ContainerStatus`` …) apart from its services (``RuntimeService``,
``ImageService``); k8py does the same: this module holds the frozen
dataclasses, enums and errors, :mod:`k8py.kubelet.runtime.protocols` the
role protocols that take and return them (and re-exports every name here, so
``from k8py.kubelet.runtime.protocols import ContainerStatus`` keeps working).

Invariants (the runtime contract is written out in ``protocols``):

- Every value is immutable (``frozen=True``); a runtime hands out new ones.
- Times are Unix seconds (floats, UTC). ``0.0`` means "not yet".
- Methods that find nothing raise :class:`NotFoundError`; a runtime that
  cannot do what is asked raises :class:`RuntimeErrorStatus`.
- Log paths follow upstream's layout: :func:`pod_log_directory` and
  :func:`container_log_path`.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass, field
from typing import Mapping, Sequence

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
    "ContainerUsage",
    "InterfaceUsage",
    "PodNetworkUsage",
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


def pod_log_directory(root: str, namespace: str, name: str, uid: str) -> str:
    """Upstream's ``/var/log/pods/<namespace>_<name>_<uid>`` under ``root``."""
    return os.path.join(root, f"{namespace}_{name}_{uid}")


def container_log_path(log_directory: str, container: str, attempt: int) -> str:
    """Upstream's ``<pod log dir>/<container>/<restartCount>.log``."""
    return os.path.join(log_directory, container, f"{attempt}.log")
