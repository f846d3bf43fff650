"""The framework of one profile: runs its plugins at each extension point, in
configured order, and turns their statuses into the cycle's outcome.

Rules it enforces (upstream ``frameworkImpl``):

- PreFilter: the first rejection fails the pod on every node (its message is
  the FitError's); Skip removes that plugin's Filter for this cycle; the
  results' node sets are intersected.
- Filter: per node, plugins run in order and the first non-success decides
  (so the reported reason is the first plugin's). Nodes are filtered in
  chunks through each plugin's batch form when it has one.
- Score: every non-skipped plugin scores every feasible node, normalizes
  if it can, and is multiplied by its weight; the node's score is the sum.
- Reserve failure or anything later: Unreserve runs on every Reserve plugin
  in reverse order. Permit: Wait holds the pod in ``waiting_pods`` until
  allowed, rejected or timed out.
- Bind: the first plugin that does not Skip binds.
"""

from __future__ import annotations

import logging
from itertools import repeat
from operator import add, mul
from typing import Any, Callable, Sequence

from k8py.scheduler.framework.diagnosis import Diagnosis
from k8py.scheduler.framework.interfaces import CycleState, PostFilterResult, PreFilterResult
from k8py.scheduler.framework.node_local import plan_for
from k8py.scheduler.framework.node_table import WINDOW_KEY
from k8py.scheduler.framework.status import Code, Status, as_error, merge
from k8py.scheduler.framework.types import NodeInfo, PodInfo, QueuedPodInfo
from k8py.scheduler.framework.waiting_pods import WaitingPod, WaitingPods

__all__ = ["Framework", "EXTENSION_POINTS"]

logger = logging.getLogger(__name__)

#: extension point -> the method a plugin implements for it
EXTENSION_POINTS = {
    "queueSort": "less", "preEnqueue": "pre_enqueue", "preFilter": "pre_filter", "filter": "filter",
    "postFilter": "post_filter", "preScore": "pre_score", "score": "score", "reserve": "reserve",
    "permit": "permit", "preBind": "pre_bind", "bind": "bind", "postBind": "post_bind",
}


class Framework:
    def __init__(
        self,
        profile_name: str,
        points: dict[str, list[Any]],
        *,
        weights: dict[str, int] | None = None,
        waiting_pods: WaitingPods | None = None,
        percentage_of_nodes_to_score: int | None = None,
    ) -> None:
        self.profile_name = profile_name
        self.points = {p: list(points.get(p, ())) for p in EXTENSION_POINTS}
        self.weights = weights or {}
        self.waiting_pods = waiting_pods if waiting_pods is not None else WaitingPods()
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        sorts = self.points["queueSort"]
        self.queue_sort = sorts[0] if sorts else None
        self.plugins = {p.name: p for plugins in self.points.values() for p in plugins}

    def has(self, point: str) -> bool:
        return bool(self.points[point])

    # -- queueing --------------------------------------------------------------------

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        assert self.queue_sort is not None
        return self.queue_sort.less(a, b)

    @property
    def sort_key(self) -> Callable[[QueuedPodInfo], Any] | None:
        """The QueueSort's ``sort_key`` (a key ordered as its ``less``), if it has one."""
        return getattr(self.queue_sort, "sort_key", None)

    def run_pre_enqueue(self, pod: PodInfo) -> Status | None:
        for plugin in self.points["preEnqueue"]:
            status = plugin.pre_enqueue(pod)
            if status is not None and not status.is_success():
                return status.with_plugin(plugin.name)
        return None

    # -- filtering ----------------------------------------------------------------------

    def run_pre_filter(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> tuple[PreFilterResult | None, Status | None]:
        result: PreFilterResult | None = None
        for plugin in self.points["preFilter"]:
            try:
                r, status = plugin.pre_filter(state, pod, nodes)
            except Exception as err:  # a plugin bug fails this pod, not the scheduler
                logger.exception("PreFilter plugin failed", extra={"plugin": plugin.name, "pod": pod.key})
                return None, as_error(err).with_plugin(plugin.name)
            if status is not None:
                if status.is_skip():
                    state.skip_filter.add(plugin.name)
                    continue
                if not status.is_success():
                    return None, status.with_plugin(plugin.name)
            if r is not None and r.node_names is not None:
                result = PreFilterResult(set(r.node_names) if result is None or result.node_names is None else result.node_names & r.node_names)
        return result, None

    def run_pre_filter_extension_add(self, state: CycleState, pod: PodInfo, add: PodInfo, node: NodeInfo) -> None:
        for plugin in self.points["preFilter"]:
            if plugin.name not in state.skip_filter and hasattr(plugin, "add_pod"):
                plugin.add_pod(state, pod, add, node)

    def run_pre_filter_extension_remove(self, state: CycleState, pod: PodInfo, remove: PodInfo, node: NodeInfo) -> None:
        for plugin in self.points["preFilter"]:
            if plugin.name not in state.skip_filter and hasattr(plugin, "remove_pod"):
                plugin.remove_pod(state, pod, remove, node)

    def active_filters(self, state: CycleState) -> list[Any]:
        return [p for p in self.points["filter"] if p.name not in state.skip_filter]

    def run_filter_plugins(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        for plugin in self.active_filters(state):
            status = plugin.filter(state, pod, node)
            if status is not None and not status.is_success():
                return status.with_plugin(plugin.name)
        return None

    def filter_chunk(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo], failed: dict[str, Status]) -> list[NodeInfo]:
        """The nodes of ``nodes`` that pass every filter: the node-local ones through
        the per-node memo (``node_local``), then the others, batch forms first."""
        plan = plan_for(state, pod, self.active_filters(state), self.points["score"])
        if plan.filters and nodes:
            nodes = plan.filter(state, pod, nodes, failed)
        for plugin in plan.others:
            if not nodes:
                break
            batch = getattr(plugin, "filter_nodes", None)
            if batch is not None:
                nodes = batch(state, pod, nodes, failed)
                continue
            passed = []
            for node in nodes:
                status = plugin.filter(state, pod, node)
                if status is None or status.is_success():
                    passed.append(node)
                else:
                    failed[node.name] = status.with_plugin(plugin.name)
            nodes = passed
        return nodes

    async def run_post_filter(self, state: CycleState, pod: PodInfo, diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status | None]:
        statuses = []
        for plugin in self.points["postFilter"]:
            result, status = await plugin.post_filter(state, pod, diagnosis)
            if status is None or status.is_success():
                return result, None
            if status.code is Code.ERROR:
                return None, status.with_plugin(plugin.name)
            statuses.append(status.with_plugin(plugin.name))
        return None, merge(statuses)

    # -- scoring -------------------------------------------------------------------------

    def run_pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        for plugin in self.points["preScore"]:
            status = plugin.pre_score(state, pod, nodes)
            if status is None:
                continue
            if status.is_skip():
                state.skip_score.add(plugin.name)
            elif not status.is_success():
                return status.with_plugin(plugin.name)
        return None

    def run_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> list[int]:
        """The weighted total score of each node, in order.

        Node-local scorers come from the memo; those without normalization are
        summed in one pass. A plugin whose (normalized) scores are equal on every
        node only adds a constant, which cannot change the choice: it is left out.
        """
        plan = plan_for(state, pod, self.active_filters(state), self.points["score"])
        local = {p.name: i for i, p in enumerate(plan.scorers)}
        entries: list[tuple[int, ...]] | None = None
        linear: list[tuple[int, int]] = []
        rest = []
        for plugin in self.points["score"]:
            if plugin.name in state.skip_score:
                continue
            i = local.get(plugin.name)
            if i is not None and not hasattr(plugin, "normalize_score"):
                linear.append((i, self.weights.get(plugin.name, 1)))
            else:
                rest.append((plugin, i))
        # the table path (framework.node_table) left the window these nodes came from
        found = state.data.get(WINDOW_KEY)
        window = found[0] if found is not None and found[1] is nodes else None
        if window is None and local and (linear or any(i is not None for _, i in rest)):
            entries = plan.scores(state, pod, nodes)
        if not linear:
            totals = [0] * len(nodes)
        elif window is not None:
            totals = window.scores(tuple(linear))
        elif len(linear) == 1:
            (i, w), = linear
            totals = [e[i] * w for e in entries]  # type: ignore[union-attr]
        elif len(linear) == 2:
            (i, w), (j, v) = linear
            totals = [e[i] * w + e[j] * v for e in entries]  # type: ignore[union-attr]
        else:
            totals = [sum(e[i] * w for i, w in linear) for e in entries]  # type: ignore[union-attr]
        for plugin, i in rest:
            if i is not None:
                scores = window.scores(((i, 1),)) if window is not None else [e[i] for e in entries]  # type: ignore[union-attr]
            else:
                batch = getattr(plugin, "score_nodes", None)
                scores = batch(state, pod, nodes) if batch is not None else [plugin.score(state, pod, n) for n in nodes]
            normalize = getattr(plugin, "normalize_score", None)
            if normalize is not None:
                normalize(state, pod, scores)
            if min(scores, default=0) == max(scores, default=0):
                continue
            weight = self.weights.get(plugin.name, 1)
            totals = list(map(add, totals, scores if weight == 1 else map(mul, scores, repeat(weight))))  # in C
        return totals

    # -- reserve, permit, bind ---------------------------------------------------------------

    def run_reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        for plugin in self.points["reserve"]:
            status = plugin.reserve(state, pod, node_name)
            if status is not None and not status.is_success():
                return status.with_plugin(plugin.name)
        return None

    def run_unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        for plugin in reversed(self.points["reserve"]):
            try:
                plugin.unreserve(state, pod, node_name)
            except Exception:
                logger.exception("Unreserve plugin failed", extra={"plugin": plugin.name, "pod": pod.key})

    def run_permit(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        waits: dict[str, float] = {}
        for plugin in self.points["permit"]:
            status, timeout = plugin.permit(state, pod, node_name)
            if status is None or status.is_success():
                continue
            if status.is_wait():
                waits[plugin.name] = timeout
                continue
            return status.with_plugin(plugin.name)
        if waits:
            self.waiting_pods.add(WaitingPod(pod, waits))
            return Status(Code.WAIT)
        return None

    async def wait_on_permit(self, pod: PodInfo) -> Status | None:
        waiting = self.waiting_pods.get(pod.uid)
        if waiting is None:
            return None
        try:
            return await waiting.wait()
        finally:
            self.waiting_pods.remove(pod.uid)

    async def run_pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        for plugin in self.points["preBind"]:
            status = await plugin.pre_bind(state, pod, node_name)
            if status is not None and not status.is_success():
                return status.with_plugin(plugin.name)
        return None

    async def run_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        for plugin in self.points["bind"]:
            status = await plugin.bind(state, pod, node_name)
            if status is not None and status.is_skip():
                continue
            return None if status is None or status.is_success() else status.with_plugin(plugin.name)
        return Status(Code.ERROR, ("no bind plugin bound the pod",))

    def run_post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        for plugin in self.points["postBind"]:
            plugin.post_bind(state, pod, node_name)
