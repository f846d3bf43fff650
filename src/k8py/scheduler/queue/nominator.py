"""The nominator: pods that preemption nominated to a node, until they are bound or gone.

Upstream keeps it beside the scheduling queue (``nominator`` in the queue package): when
DefaultPreemption evicts victims for a pod it sets the pod's ``status.nominatedNodeName`` and
the scheduler records it here, so that while the victims terminate the filters of every other
pod count the nominated pod as already on that node (``filter_with_nominated_pods``) and a pod
of lower priority does not take the room it made. A pod has at most one nominated node;
nominating it again moves it.
"""

from __future__ import annotations

from k8py.scheduler.framework.types import PodInfo

__all__ = ["Nominator"]


class Nominator:
    def __init__(self) -> None:
        #: node name -> pod key -> the nominated pod
        self.by_node: dict[str, dict[str, PodInfo]] = {}
        self._node_of: dict[str, str] = {}

    def __bool__(self) -> bool:
        return bool(self.by_node)

    def add(self, info: PodInfo, node_name: str) -> None:
        """Nominate ``info`` to ``node_name`` (an empty name only forgets its nomination)."""
        self.delete(info.key)
        if not node_name:
            return
        self.by_node.setdefault(node_name, {})[info.key] = info
        self._node_of[info.key] = node_name

    def delete(self, key: str) -> None:
        node = self._node_of.pop(key, None)
        if node is not None:
            pods = self.by_node.get(node)
            if pods is not None:
                pods.pop(key, None)
                if not pods:
                    del self.by_node[node]

    def pods_for_node(self, node_name: str) -> list[PodInfo]:
        return list((self.by_node.get(node_name) or {}).values())
