"""NodeUnschedulable (Filter): a cordoned node (``spec.unschedulable``) takes
only pods tolerating ``node.kubernetes.io/unschedulable:NoSchedule``."""

from __future__ import annotations

from typing import Any

from k8py.scheduler.framework.interfaces import ClusterEventHint, CycleState
from k8py.scheduler.framework.status import Status, unresolvable
from k8py.scheduler.framework.types import NodeInfo, PodInfo
from k8py.scheduler.plugins.names import NODE_UNSCHEDULABLE
from k8py.scheduler.plugins.taint_toleration import tolerates

__all__ = ["NodeUnschedulable", "fits", "REASON"]

REASON = "node(s) were unschedulable"
_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def fits(pod: PodInfo, unschedulable: bool) -> bool:
    return not unschedulable or any(tolerates(t, _TAINT) for t in pod.tolerations)


class NodeUnschedulable:
    name = NODE_UNSCHEDULABLE

    def __init__(self, args: dict | None = None, handle: object = None) -> None:
        pass

    def local_key(self, pod: PodInfo) -> object:
        """Filter and Score read only the node and this digest of the pod (see framework.node_local)."""
        return pod.shape("tolerations")

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        return None if fits(pod, node.unschedulable) else unresolvable(REASON)

    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo], failed: dict[str, Status]) -> list[NodeInfo]:
        out = []
        for node in nodes:
            if not node.unschedulable or fits(pod, True):
                out.append(node)
            else:
                failed[node.name] = unresolvable(REASON).with_plugin(self.name)
        return out

    def events_to_register(self) -> list[ClusterEventHint]:
        def hint(pod: PodInfo, old: dict[str, Any] | None, new: dict[str, Any] | None) -> bool:
            return new is not None and fits(pod, bool((new.get("spec") or {}).get("unschedulable")))

        return [ClusterEventHint("Node", frozenset({"Add", "UpdateNodeTaint"}), hint)]
