"""The table path of a scheduling cycle (framework.node_table) decides exactly
as the per-node path: same node, same nodes evaluated, same next start index,
through node churn, pod churn, filters that fail and scores that differ."""

from __future__ import annotations

import random
from typing import Any

import pytest

from k8py.scheduler.cache import SchedulerCache
from k8py.scheduler.framework.diagnosis import FitError
from k8py.scheduler.framework.interfaces import CycleState
from k8py.scheduler.framework.node_table import LocalTable
from k8py.scheduler.framework.types import PodInfo
from k8py.scheduler.profile import SchedulerConfig, build_frameworks
from k8py.scheduler.schedule_one import PodScheduler
from tests.scheduler.conftest import node as node_obj
from tests.scheduler.conftest import pod as pod_obj

PREFER = [{"key": "spot", "value": "yes", "effect": "PreferNoSchedule"}]
NO_SCHEDULE = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]


class World:
    """A cache, the default profile and a PodScheduler: one side of the comparison."""

    def __init__(self, *, table: bool, seed: int, percentage: int | None = None) -> None:
        self.cache = SchedulerCache()
        self.table = table
        cache = self.cache

        class Handle:
            def __init__(self) -> None:
                self.cache = cache
                self.nodes = cache.nodes
                self.node = cache.node
                self.image_node_count = cache.image_node_count
                self.namespace_labels = lambda ns: {}

        config = SchedulerConfig()
        if percentage is not None:
            config.percentage_of_nodes_to_score = percentage
        self.fwk = build_frameworks(config, Handle())["default-scheduler"]
        self.algo = PodScheduler(rng=random.Random(seed).random)
        self.count = 0

    def schedule(self, pod: dict[str, Any], workload: str = "") -> tuple[str, int, int] | str:
        """``workload``: the pod is a ReplicaSet's, labelled ``app=<workload>`` (so the
        System default spread constraints score it)."""
        self.count += 1
        obj = pod_obj(f"p-{self.count}", labels={"app": workload} if workload else None, **pod)
        if workload:
            obj["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": workload,
                                                   "uid": f"rs-{workload}", "controller": True}]
        info = PodInfo(obj)
        info.pod["metadata"]["uid"] = f"uid-{self.count}"
        try:
            result = self.algo.schedule(self.fwk, CycleState(), info, self.cache.nodes, None, "", self.cache.node,
                                        changes=self.cache if self.table else None)
        except FitError as err:
            return str(err)
        self.cache.assume_pod(info.with_node(result.node_name))
        return result.node_name, result.evaluated_nodes, self.algo.next_start_index


def _node(i: int, rng: random.Random, uniform: bool = False) -> dict[str, Any]:
    if uniform:  # every node alike: the windows hold feasible nodes only, and scores tie
        return node_obj(f"node-{i}", cpu="8", memory="16Gi")
    kind = rng.random()
    return node_obj(f"node-{i}", cpu=rng.choice(["1", "2", "4"]), memory=rng.choice(["2Gi", "4Gi"]),
                    taints=PREFER if kind < 0.15 else NO_SCHEDULE if kind < 0.25 else None,
                    unschedulable=0.25 <= kind < 0.3)


SHAPES = [
    {"cpu": "100m", "memory": "100Mi"},
    {"cpu": "500m", "memory": "1Gi"},
    {"cpu": "900m", "memory": "200Mi", "tolerations": [{"key": "dedicated", "operator": "Exists"}]},
]


@pytest.mark.parametrize("nodes,percentage,uniform,workloads", [(300, None, False, 0), (150, 30, False, 0), (60, None, False, 0),
                                                                (200, None, True, 0), (300, None, True, 3), (250, 20, False, 2)])
def test_the_table_path_chooses_as_the_per_node_path(nodes: int, percentage: int | None, uniform: bool, workloads: int) -> None:
    """With ``workloads``, the pods belong to that many ReplicaSets: spread by hostname under the
    System defaults, which the table path scores from each workload's row of counts by node
    position (kept through nodes leaving and joining) and the per-node path by node name."""
    fast, slow = World(table=True, seed=7, percentage=percentage), World(table=False, seed=7, percentage=percentage)
    rng = random.Random(nodes)
    for world in (fast, slow):
        build = random.Random(nodes)
        for i in range(nodes):
            world.cache.add_node(_node(i, build, uniform))
    next_node = nodes
    for step in range(1500):
        shape = SHAPES[rng.randrange(len(SHAPES))]
        workload = f"w{rng.randrange(workloads)}" if workloads else ""
        assert fast.schedule(shape, workload) == slow.schedule(shape, workload), f"step {step}"
        roll = rng.random()
        if roll < 0.02:  # a node leaves (the list's positions move)
            victim = f"node-{rng.randrange(next_node)}"
            for world in (fast, slow):
                world.cache.remove_node(victim)
        elif roll < 0.04:  # a node joins
            obj = _node(next_node, random.Random(next_node), uniform)
            next_node += 1
            for world in (fast, slow):
                world.cache.add_node(obj)
        elif roll < 0.10:  # a pod goes away
            key = f"default/p-{rng.randrange(1, fast.count + 1)}"  # (a workload's pods as well)
            for world in (fast, slow):
                world.cache.forget_pod(key)
        elif roll < 0.11:  # a node changes in place (now tainted PreferNoSchedule)
            i = rng.randrange(next_node)
            for world in (fast, slow):
                if world.cache.node(f"node-{i}") is not None:
                    world.cache.update_node(node_obj(f"node-{i}", cpu="4", memory="4Gi", taints=PREFER))
    # the cluster filled up along the way: some pods fit nowhere, with the same message
    assert fast.schedule({"cpu": "64"}) == slow.schedule({"cpu": "64"})
    assert "Insufficient cpu" in fast.schedule({"cpu": "64"})  # type: ignore[operator]


def test_a_window_is_the_shortest_run_from_the_start_holding_the_wanted_nodes() -> None:
    table = LocalTable()
    table.entries = [(0, None, ())] * 10
    table.ok = bytearray([1, 0, 0, 1, 1, 0, 1, 0, 1, 1])
    table.feasible = table.ok.count(1)
    w = table.window(2, 3)
    assert w is not None and w.ranges == [(2, 7)] and w.processed == 5
    assert w.take(list(range(10))) == [3, 4, 6]
    w = table.window(7, 4)  # wraps: 8, 9, then 0, 3
    assert w is not None and w.ranges == [(7, 10), (0, 4)] and w.processed == 7
    assert w.take(list(range(10))) == [8, 9, 0, 3]
    w = table.window(5, 9)  # fewer feasible than wanted: every node, from the start
    assert w is not None and w.processed == 10 and w.take(list(range(10))) == [6, 8, 9, 0, 3, 4]
    table.ok = bytearray(10)
    table.feasible = 0
    assert table.window(0, 3) is None
