"""NodeName (Filter): a pod that names ``spec.nodeName`` fits only that node."""

from __future__ import annotations

from typing import Sequence

from k8py.scheduler.framework.interfaces import ClusterEventHint, CycleState, PreFilterResult
from k8py.scheduler.framework.status import Code, Status, unresolvable
from k8py.scheduler.framework.types import NodeInfo, PodInfo
from k8py.scheduler.plugins.names import NODE_NAME

__all__ = ["NodeName", "fits", "REASON"]

REASON = "node(s) didn't match the requested node name"


def fits(pod: PodInfo, node: NodeInfo) -> bool:
    return not pod.node_name or pod.node_name == node.name


class NodeName:
    name = NODE_NAME

    def __init__(self, args: dict | None = None, handle: object = None) -> None:
        pass

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> tuple[PreFilterResult | None, Status | None]:
        if not pod.node_name:
            return None, Status(Code.SKIP)
        return PreFilterResult({pod.node_name}), None

    def local_key(self, pod: PodInfo) -> object:
        """Filter and Score read only the node and this digest of the pod (see framework.node_local)."""
        return pod.node_name

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        return None if fits(pod, node) else unresolvable(REASON)

    def events_to_register(self) -> list[ClusterEventHint]:
        return [ClusterEventHint("Node", frozenset({"Add"}), lambda pod, old, new: new is not None and new.get("metadata", {}).get("name") == pod.node_name)]
