"""What the kubelet hands its HTTP server (:mod:`k8py.kubelet.server`).

The server serves logs, exec, attach, port-forward, stats and health; it
owns none of the state it shows. Everything it reads comes through this
context, so the server never reaches into the pod workers or the runtime's
internals:

- ``runtime`` — the :class:`~k8py.kubelet.runtime.protocols.Runtime`
  (exec_spec / exec_sync / port_forward_address / attach_fifo, container
  statuses with their CRI-format ``log_path``);
- ``pods`` — a :class:`PodContainers` view: the pods the kubelet runs and
  their containers, current and previous attempts;
- ``registry`` — the prometheus registry /metrics serves;
- ``healthy`` — what /healthz answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence

from prometheus_client import CollectorRegistry

from k8py.kubelet.runtime.protocols import ContainerStatus, Runtime

__all__ = ["PodContainers", "ServerContext"]


class PodContainers(Protocol):
    def pods(self) -> Sequence[Mapping[str, Any]]:
        """The API Pod objects bound to this node that the kubelet knows (do not modify)."""

    def sandbox_id(self, namespace: str, name: str) -> str | None:
        """The pod's current sandbox id, or None if it has none."""

    async def containers(self, namespace: str, name: str) -> Sequence[ContainerStatus]:
        """Every container of the pod the runtime still has, all attempts,
        newest attempt last per container name (``--previous`` is the one
        before the newest). Empty if the pod is unknown."""


@dataclass
class ServerContext:
    node_name: str
    runtime: Runtime
    pods: PodContainers
    registry: CollectorRegistry
    healthy: Callable[[], bool] = field(default=lambda: True)
    #: (a path on the node's filesystem, a path on the image filesystem): the summary's ``node.fs`` and
    #: ``node.runtime.imageFs`` ("" leaves one out)
    filesystems: Callable[[], tuple[str, str]] = field(default=lambda: ("", ""))
