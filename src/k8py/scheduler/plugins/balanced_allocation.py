"""NodeResourcesBalancedAllocation (Score): prefer nodes whose cpu and memory
(by default) would be used in equal fractions: ``(1 - std(fractions)) * 100``,
each fraction ``requested / allocatable`` capped at 1. A pod that requests
nothing is skipped (PreScore Skip), as upstream."""

from __future__ import annotations

import math
from typing import Any, Sequence

from k8py.scheduler.framework.interfaces import MAX_NODE_SCORE, CycleState
from k8py.scheduler.framework.status import Code, Status
from k8py.scheduler.framework.types import NodeInfo, PodInfo
from k8py.scheduler.plugins.names import NODE_RESOURCES_BALANCED_ALLOCATION

__all__ = ["BalancedAllocation", "balanced_score"]


def balanced_score(fractions: Sequence[float]) -> int:
    if not fractions:
        return 0
    if len(fractions) == 2:
        std = abs(fractions[0] - fractions[1]) / 2
    else:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
    return int((1 - std) * MAX_NODE_SCORE)


class BalancedAllocation:
    name = NODE_RESOURCES_BALANCED_ALLOCATION

    def __init__(self, args: dict[str, Any] | None = None, handle: object = None) -> None:
        args = args or {}
        self.resources = [r["name"] for r in args.get("resources") or ()] or ["cpu", "memory"]
        self._default = self.resources == ["cpu", "memory"]

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        r = pod.requests
        if not any(r.get(name) for name in self.resources):
            return Status(Code.SKIP)
        return None

    def local_key(self, pod: PodInfo) -> object:
        """Filter and Score read only the node and this digest of the pod (see framework.node_local)."""
        return pod.shape("requests")

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        fractions = []
        for name in self.resources:
            capacity = node.allocatable.get(name)
            if capacity == 0:
                continue
            requested = node.requested.get(name) + pod.requests.get(name)
            fractions.append(min(requested / capacity, 1.0))
        return balanced_score(fractions)

    def score_nodes(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> list[int]:
        if not self._default:
            return [self.score(state, pod, n) for n in nodes]
        pc, pm = pod.requests.milli_cpu, pod.requests.memory
        out = []
        for n in nodes:
            ac, am = n.allocatable.milli_cpu, n.allocatable.memory
            if ac and am:
                fc = min((n.requested.milli_cpu + pc) / ac, 1.0)
                fm = min((n.requested.memory + pm) / am, 1.0)
                out.append(int((1 - abs(fc - fm) / 2) * MAX_NODE_SCORE))
            else:
                out.append(self.score(state, pod, n))
        return out
