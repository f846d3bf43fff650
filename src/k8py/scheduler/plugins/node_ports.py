"""NodePorts (Filter): the pod's ``hostPort``s must be free on the node (same
protocol and port, and either address is 0.0.0.0 or they are equal)."""

from __future__ import annotations

from typing import Sequence

from k8py.scheduler.framework.interfaces import ClusterEventHint, CycleState, PreFilterResult
from k8py.scheduler.framework.status import Code, Status, unschedulable
from k8py.scheduler.framework.types import NodeInfo, PodInfo
from k8py.scheduler.plugins.names import NODE_PORTS

__all__ = ["NodePorts", "ports_conflict", "REASON"]

REASON = "node(s) didn't have free ports for the requested pod ports"


def ports_conflict(wanted: Sequence[tuple[str, str, int]], used: dict[tuple[str, int], dict[str, int]]) -> bool:
    for ip, protocol, port in wanted:
        ips = used.get((protocol, port))
        if not ips:
            continue
        if ip == "0.0.0.0" or "0.0.0.0" in ips or ip in ips:
            return True
    return False


class NodePorts:
    name = NODE_PORTS

    def __init__(self, args: dict | None = None, handle: object = None) -> None:
        pass

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> tuple[PreFilterResult | None, Status | None]:
        return (None, Status(Code.SKIP)) if not pod.host_ports else (None, None)

    def local_key(self, pod: PodInfo) -> object:
        """Filter and Score read only the node and this digest of the pod (see framework.node_local)."""
        return pod.shape("ports")

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        return unschedulable(REASON) if ports_conflict(pod.host_ports, node.used_ports) else None

    def events_to_register(self) -> list[ClusterEventHint]:
        return [ClusterEventHint("AssignedPod", frozenset({"Delete"})), ClusterEventHint("Node", frozenset({"Add"}))]
