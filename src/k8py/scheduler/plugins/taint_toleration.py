"""TaintToleration: Filter on NoSchedule/NoExecute taints the pod does not
tolerate (UnschedulableAndUnresolvable); Score by the number of untolerated
PreferNoSchedule taints (fewer is better, normalized reversed)."""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from k8py.api.taints import tolerates
from k8py.scheduler.framework.interfaces import MAX_NODE_SCORE, ClusterEventHint, CycleState
from k8py.scheduler.framework.status import Status, unresolvable
from k8py.scheduler.framework.types import NodeInfo, PodInfo
from k8py.scheduler.plugins.names import TAINT_TOLERATION

__all__ = ["TaintToleration", "tolerates", "first_untolerated", "untolerated_reason", "count_intolerable", "default_normalize"]

Object = dict[str, Any]


def first_untolerated(taints: Iterable[Object], tolerations: Sequence[Object]) -> Object | None:
    for taint in taints:
        if not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def untolerated_reason(taint: Object) -> str:
    return f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value', '')}}}"


def count_intolerable(taints: Iterable[Object], tolerations: Sequence[Object]) -> int:
    prefer = [t for t in tolerations if (t.get("effect") or "") in ("", "PreferNoSchedule")]
    return sum(1 for taint in taints if not any(tolerates(t, taint) for t in prefer))


def default_normalize(scores: list[int], reverse: bool) -> None:
    """Upstream ``helper.DefaultNormalizeScore``: scale to [0, 100] by the max; reversed if asked."""
    top = max(scores, default=0)
    if top == 0:
        if reverse:
            scores[:] = [MAX_NODE_SCORE] * len(scores)
        return
    for i, s in enumerate(scores):
        s = MAX_NODE_SCORE * s // top
        scores[i] = MAX_NODE_SCORE - s if reverse else s


class TaintToleration:
    name = TAINT_TOLERATION

    def __init__(self, args: dict | None = None, handle: object = None) -> None:
        pass

    def local_key(self, pod: PodInfo) -> object:
        """Filter and Score read only the node and this digest of the pod (see framework.node_local)."""
        return pod.shape("tolerations")

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if not node.no_schedule_taints:
            return None
        taint = first_untolerated(node.no_schedule_taints, pod.tolerations)
        return None if taint is None else unresolvable(untolerated_reason(taint))

    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo], failed: dict[str, Status]) -> list[NodeInfo]:
        out = []
        tolerations = pod.tolerations
        for node in nodes:
            if not node.no_schedule_taints:
                out.append(node)
                continue
            taint = first_untolerated(node.no_schedule_taints, tolerations)
            if taint is None:
                out.append(node)
            else:
                failed[node.name] = unresolvable(untolerated_reason(taint)).with_plugin(self.name)
        return out

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        return count_intolerable(node.prefer_no_schedule_taints, pod.tolerations) if node.prefer_no_schedule_taints else 0

    def score_nodes(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> list[int]:
        tolerations = pod.tolerations
        return [count_intolerable(n.prefer_no_schedule_taints, tolerations) if n.prefer_no_schedule_taints else 0 for n in nodes]

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        default_normalize(scores, reverse=True)

    def events_to_register(self) -> list[ClusterEventHint]:
        def hint(pod: PodInfo, old: Object | None, new: Object | None) -> bool:
            if new is None:
                return False
            taints = [t for t in (new.get("spec") or {}).get("taints") or () if t.get("effect") in ("NoSchedule", "NoExecute")]
            return first_untolerated(taints, pod.tolerations) is None

        return [ClusterEventHint("Node", frozenset({"Add", "UpdateNodeTaint"}), hint),
                ClusterEventHint("Pod", frozenset({"UpdatePodToleration"}))]
