"""One pod's placement decision: filter, score, pick (upstream ``schedulePod``).

Pure over its inputs — the framework, the node views and the nominated pods —
so it is tested without any API server, and the benchmark times it alone.

- **How many nodes to look at**: once ``num_feasible_nodes_to_find`` feasible
  nodes are found, filtering stops (``percentageOfNodesToScore``; adaptive by
  default: ``50 - nodes/125`` percent, at least 5 %, at least 100 nodes).
  Each cycle starts where the previous one stopped (the rotating start
  index), so all nodes get their turn.
- **The nominated node first**: a pod that preemption nominated to a node is
  tried on that node alone before anything else.
- **Nominated pods count**: on a node where other pods of at least this pod's
  priority are nominated, the filters run with those pods added too.
- **Ties** between the best scores are broken uniformly at random.
- **The table path**: given the cache's change log (``changes``), a cycle
  whose active filters are all node-local reads its window of nodes from a
  per-shape table (``framework.node_table``) instead of visiting each node;
  the nodes chosen, the scores and the next start index are those of the
  per-node path.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from itertools import compress, repeat
from operator import eq
from typing import Callable, Sequence

from k8py.scheduler.framework.diagnosis import Diagnosis, FitError
from k8py.scheduler.framework.interfaces import CycleState
from k8py.scheduler.framework.node_local import plan_for
from k8py.scheduler.framework.node_table import WINDOW_KEY, LocalTables, NodeChanges
from k8py.scheduler.framework.runtime import Framework
from k8py.scheduler.framework.status import Code, Status
from k8py.scheduler.framework.types import NodeInfo, PodInfo

__all__ = ["PodScheduler", "ScheduleResult", "num_feasible_nodes_to_find", "select_host", "NoNodesAvailable",
           "MIN_FEASIBLE_NODES_TO_FIND", "MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND"]

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
_DEFAULT_BASE_PERCENTAGE = 50


class NoNodesAvailable(Exception):
    def __str__(self) -> str:
        return "no nodes available to schedule pods"


def num_feasible_nodes_to_find(percentage: int | None, num_all_nodes: int) -> int:
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    adaptive = percentage or 0
    if adaptive >= 100:
        return num_all_nodes
    if adaptive <= 0:
        adaptive = _DEFAULT_BASE_PERCENTAGE - num_all_nodes // 125
        if adaptive < MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND:
            adaptive = MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND
    num = num_all_nodes * adaptive // 100
    return max(num, MIN_FEASIBLE_NODES_TO_FIND)


def select_host(nodes: Sequence[NodeInfo], scores: Sequence[int], rng: Callable[[], float] = random.random) -> str:
    """The highest-scoring node; ties broken uniformly at random."""
    if not nodes:
        return ""
    best = max(scores)
    if scores.count(best) == 1:
        return nodes[scores.index(best)].name
    # the positions of the best scores, found in C (uniform nodes tie by the hundred)
    ties = list(compress(range(len(scores)), map(eq, scores, repeat(best))))
    return nodes[ties[min(int(rng() * len(ties)), len(ties) - 1)]].name


@dataclass(slots=True)
class ScheduleResult:
    node_name: str
    evaluated_nodes: int
    feasible_nodes: int


NominatedPods = Callable[[str], list[PodInfo]]


class PodScheduler:
    """Keeps the rotating start index between cycles; see the module docstring."""

    def __init__(self, *, rng: Callable[[], float] = random.random) -> None:
        self.next_start_index = 0
        self.rng = rng
        self.tables = LocalTables()

    def schedule(self, fwk: Framework, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo],
                 nominated: NominatedPods | None = None, nominated_node: str = "",
                 node_by_name: Callable[[str], NodeInfo | None] | None = None,
                 changes: NodeChanges | None = None) -> ScheduleResult:
        """``changes``, if given, is the change log of ``nodes`` (the cache): it
        enables the table path (see the module docstring)."""
        if not nodes:
            raise NoNodesAvailable()
        feasible, diagnosis, evaluated = self.find_nodes_that_fit(fwk, state, pod, nodes, nominated, nominated_node,
                                                                  node_by_name, changes=changes)
        if not feasible:
            raise FitError(pod.key, len(nodes), diagnosis)
        if len(feasible) == 1:
            return ScheduleResult(feasible[0].name, evaluated, 1)
        status = fwk.run_pre_score(state, pod, feasible)
        if status is not None and not status.is_success():
            raise RuntimeError(f"running PreScore plugin {status.plugin!r}: {status.message()}")
        scores = fwk.run_score(state, pod, feasible)
        return ScheduleResult(select_host(feasible, scores, self.rng), evaluated, len(feasible))

    def find_nodes_that_fit(self, fwk: Framework, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo],
                            nominated: NominatedPods | None = None, nominated_node: str = "",
                            node_by_name: Callable[[str], NodeInfo | None] | None = None,
                            *, changes: NodeChanges | None = None) -> tuple[list[NodeInfo], Diagnosis, int]:
        diagnosis = Diagnosis()
        result, status = fwk.run_pre_filter(state, pod, nodes)
        if status is not None:
            if status.code is Code.ERROR:
                raise RuntimeError(f"running PreFilter plugin {status.plugin!r}: {status.message()}")
            diagnosis.pre_filter_msg = status.message()
            diagnosis.absent_status = status
            if status.plugin:
                diagnosis.unschedulable_plugins.add(status.plugin)
            for node in nodes:
                diagnosis.node_to_status[node.name] = status
            return [], diagnosis, 0

        lookup = node_by_name or (lambda name: next((n for n in nodes if n.name == name), None))
        if nominated_node:
            node = lookup(nominated_node)
            if node is not None and (result is None or result.node_names is None or node.name in result.node_names):
                if self._filter_one(fwk, state, pod, node, nominated) is None:
                    return [node], diagnosis, 1

        if result is not None and result.node_names is not None:
            candidates = [n for n in (lookup(name) for name in sorted(result.node_names)) if n is not None]
            start = 0
            rotate = False
            if not candidates:
                # every node is ruled out by the PreFilter result
                reject = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("node(s) didn't satisfy plugin(s) [PreFilterResult]",))
                for node in nodes:
                    diagnosis.node_to_status[node.name] = reject
                return [], diagnosis, 0
        else:
            candidates = list(nodes) if not isinstance(nodes, list) else nodes
            start = self.next_start_index % len(candidates)
            rotate = True
        n = len(candidates)
        want = num_feasible_nodes_to_find(fwk.percentage_of_nodes_to_score, n)
        has_nominated = nominated is not None
        if rotate and changes is not None and not has_nominated:
            found = self._from_table(fwk, state, pod, candidates, start, want, changes)
            if found is not None:
                feasible, processed = found
                self.next_start_index = (start + processed) % n
                return feasible, diagnosis, processed
        feasible = []
        failed: dict[str, Status] = {}
        processed = 0
        while len(feasible) < want and processed < n:
            size = min(want - len(feasible), n - processed)
            lo = (start + processed) % n
            hi = lo + size
            chunk = candidates[lo:hi] if hi <= n else candidates[lo:] + candidates[: hi - n]
            processed += size
            if has_nominated:
                plain = []
                for node in chunk:
                    if nominated(node.name):  # type: ignore[misc]
                        status = self._filter_one(fwk, state, pod, node, nominated)
                        if status is None:
                            feasible.append(node)
                        else:
                            failed[node.name] = status
                    else:
                        plain.append(node)
                chunk = plain
            feasible.extend(fwk.filter_chunk(state, pod, chunk, failed))
        if rotate:
            self.next_start_index = (start + processed) % n
        for name, status in failed.items():
            diagnosis.record(name, status)
        return feasible, diagnosis, processed

    def _from_table(self, fwk: Framework, state: CycleState, pod: PodInfo, nodes: list[NodeInfo], start: int,
                    want: int, changes: NodeChanges) -> tuple[list[NodeInfo], int] | None:
        """(feasible nodes, nodes processed) read from the shape's table, or None
        where only the per-node path applies (a non-local filter, no feasible node)."""
        plan = plan_for(state, pod, fwk.active_filters(state), fwk.points["score"])
        if plan.others:
            return None
        table = self.tables.get(fwk.profile_name, plan.key)
        table.sync(plan, state, pod, nodes, changes)
        window = table.window(start, want)
        if window is None:
            return None
        feasible: list[NodeInfo] = window.take(nodes)
        state.data[WINDOW_KEY] = (window, feasible)  # run_score reads the scores from it
        return feasible, window.processed

    def _filter_one(self, fwk: Framework, state: CycleState, pod: PodInfo, node: NodeInfo,
                    nominated: NominatedPods | None) -> Status | None:
        return filter_with_nominated_pods(fwk, state, pod, node, nominated)


def filter_with_nominated_pods(fwk: Framework, state: CycleState, pod: PodInfo, node: NodeInfo,
                               nominated: NominatedPods | None) -> Status | None:
    """Upstream ``RunFilterPluginsWithNominatedPods``: with the node's nominated
    pods of at least this priority added, then (if that passed) without them."""
    others = [p for p in (nominated(node.name) if nominated else ()) if p.key != pod.key and p.priority >= pod.priority]
    if others:
        state2 = state.clone()
        node2 = node.clone()
        for other in others:
            node2.add_pod(other)
            fwk.run_pre_filter_extension_add(state2, pod, other, node2)
        status = fwk.run_filter_plugins(state2, pod, node2)
        if status is not None:
            return status
    return fwk.run_filter_plugins(state, pod, node)
