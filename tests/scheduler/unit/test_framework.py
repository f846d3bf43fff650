"""The framework runtime: status merging, plugin order, Skip, Permit wait/reject, Unreserve."""

from __future__ import annotations

import asyncio

import pytest

from k8py.scheduler.framework.diagnosis import Diagnosis, fit_error_message
from k8py.scheduler.framework.interfaces import CycleState
from k8py.scheduler.framework.runtime import Framework
from k8py.scheduler.framework.status import Code, Status, merge, unresolvable, unschedulable
from k8py.scheduler.plugins.priority_sort import PrioritySort
from k8py.scheduler.profile import SchedulerConfig, build_frameworks
from k8py.scheduler.profile.config import ProfileConfig
from k8py.scheduler.schedule_one import PodScheduler, num_feasible_nodes_to_find, select_host
from tests.scheduler.unit.helpers import node_info, pod_info


def test_merge_keeps_the_most_severe_code_and_every_reason():
    assert merge([None, Status(Code.SUCCESS)]) is None
    m = merge([unschedulable("a"), unresolvable("b"), None])
    assert m.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE and m.reasons == ("a", "b")
    assert merge([unschedulable("a"), Status(Code.ERROR, ("boom",))]).code is Code.ERROR


def test_fit_error_message_counts_and_sorts_reasons():
    d = Diagnosis()
    d.record("n1", unschedulable("Insufficient cpu"))
    d.record("n2", unresolvable("node(s) had untolerated taint {dedicated: gpu}"))
    d.record("n3", unresolvable("node(s) had untolerated taint {dedicated: gpu}"))
    assert fit_error_message(3, d) == "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {dedicated: gpu}."
    d.post_filter_msg = "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
    assert fit_error_message(3, d).endswith(". preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.")
    pre = Diagnosis(pre_filter_msg="node(s) didn't satisfy plugin(s) [X]")
    assert fit_error_message(2, pre) == "0/2 nodes are available: node(s) didn't satisfy plugin(s) [X]."


class Recorder:
    """A plugin that implements every point and logs what it was asked."""

    def __init__(self, name, log, *, filter_status=None, reserve_status=None, permit=None, prefilter=None):
        self.name = name
        self.log = log
        self.filter_status = filter_status
        self.reserve_status = reserve_status
        self.permit_result = permit
        self.prefilter = prefilter

    def pre_filter(self, state, pod, nodes):
        self.log.append(("preFilter", self.name))
        return None, self.prefilter

    def filter(self, state, pod, node):
        self.log.append(("filter", self.name, node.name))
        return self.filter_status

    def reserve(self, state, pod, node_name):
        self.log.append(("reserve", self.name))
        return self.reserve_status

    def unreserve(self, state, pod, node_name):
        self.log.append(("unreserve", self.name))

    def permit(self, state, pod, node_name):
        return self.permit_result or (None, 0)


def _fwk(*plugins):
    points = {"queueSort": [PrioritySort()], "preFilter": list(plugins), "filter": list(plugins),
              "reserve": list(plugins), "permit": list(plugins)}
    return Framework("test", points)


def test_filters_run_in_order_and_the_first_failure_decides():
    log = []
    a = Recorder("A", log, filter_status=unschedulable("from A"))
    b = Recorder("B", log, filter_status=unschedulable("from B"))
    fwk = _fwk(a, b)
    status = fwk.run_filter_plugins(CycleState(), pod_info(), node_info("n"))
    assert status.message() == "from A" and status.plugin == "A"
    assert ("filter", "B", "n") not in log


def test_prefilter_skip_removes_the_plugins_filter():
    log = []
    a = Recorder("A", log, prefilter=Status(Code.SKIP), filter_status=unschedulable("never"))
    fwk = _fwk(a)
    state = CycleState()
    fwk.run_pre_filter(state, pod_info(), [])
    assert fwk.filter_chunk(state, pod_info(), [node_info("n")], {}) != []
    assert not any(entry[0] == "filter" for entry in log)


def test_reserve_failure_unreserves_every_plugin_in_reverse():
    log = []
    a, b = Recorder("A", log), Recorder("B", log, reserve_status=unschedulable("no"))
    fwk = _fwk(a, b)
    status = fwk.run_reserve(CycleState(), pod_info(), "n")
    assert status.plugin == "B"
    fwk.run_unreserve(CycleState(), pod_info(), "n")
    assert log[-2:] == [("unreserve", "B"), ("unreserve", "A")]


async def test_permit_wait_is_released_by_allow():
    a = Recorder("A", [], permit=(Status(Code.WAIT), 30.0))
    fwk = _fwk(a)
    pod = pod_info()
    assert fwk.run_permit(CycleState(), pod, "n").code is Code.WAIT
    waiter = asyncio.create_task(fwk.wait_on_permit(pod))
    await asyncio.sleep(0)
    fwk.waiting_pods.get(pod.uid).allow("A")
    assert await waiter is None
    assert len(fwk.waiting_pods) == 0


async def test_permit_wait_rejected_or_timed_out_is_unschedulable():
    fwk = _fwk(Recorder("A", [], permit=(Status(Code.WAIT), 30.0)))
    pod = pod_info("r")
    fwk.run_permit(CycleState(), pod, "n")
    fwk.waiting_pods.get(pod.uid).reject("A", "not today")
    status = await fwk.wait_on_permit(pod)
    assert status.code is Code.UNSCHEDULABLE and status.message() == "not today"
    fwk = _fwk(Recorder("A", [], permit=(Status(Code.WAIT), 0.01)))
    pod = pod_info("t")
    fwk.run_permit(CycleState(), pod, "n")
    status = await fwk.wait_on_permit(pod)
    assert "rejected due to timeout" in status.message()


@pytest.mark.parametrize("percentage, nodes, want", [
    (0, 50, 50), (0, 100, 100), (0, 1000, 420), (0, 5000, 500), (0, 10000, 500), (0, 200, 100), (30, 1000, 300), (100, 5000, 5000),
])
def test_num_feasible_nodes_to_find(percentage, nodes, want):
    # 50 - 1000/125 = 42 %; 5000 -> 10 %; 10000 -> 5 % floor; never fewer than 100
    assert num_feasible_nodes_to_find(percentage, nodes) == want


def test_rotating_start_index_spreads_evaluation():
    fwk = build_frameworks(SchedulerConfig(profiles=[ProfileConfig(percentage_of_nodes_to_score=1)]), None)["default-scheduler"]
    nodes = [node_info(f"n{i}") for i in range(300)]
    algo = PodScheduler()
    _, _, evaluated = algo.find_nodes_that_fit(fwk, CycleState(), pod_info(), nodes)
    assert evaluated == 100 and algo.next_start_index == 100
    algo.find_nodes_that_fit(fwk, CycleState(), pod_info("q"), nodes)
    assert algo.next_start_index == 200


def test_select_host_breaks_ties_at_random():
    nodes = [node_info("a"), node_info("b"), node_info("c")]
    assert select_host(nodes, [1, 5, 3]) == "b"
    seen = {select_host(nodes, [5, 5, 1]) for _ in range(200)}
    assert seen == {"a", "b"}


def test_scheduling_picks_the_least_allocated_node():
    handle = type("H", (), {"nodes": [], "node": staticmethod(lambda n: None), "image_node_count": staticmethod(lambda i: 0)})()
    fwk = build_frameworks(SchedulerConfig(), handle)["default-scheduler"]
    busy = node_info("busy", pod_info("x", cpu="3"), cpu="4")
    idle = node_info("idle", cpu="4")
    handle.nodes = [busy, idle]
    result = PodScheduler().schedule(fwk, CycleState(), pod_info(cpu="500m"), [busy, idle])
    assert result.node_name == "idle" and result.feasible_nodes == 2
