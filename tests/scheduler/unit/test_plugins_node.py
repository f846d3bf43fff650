"""Table tests for the node-local plugins' pure functions."""

from __future__ import annotations

import pytest

from k8py.scheduler.framework.types import pod_requests
from k8py.scheduler.plugins.balanced_allocation import balanced_score
from k8py.scheduler.plugins.image_locality import MAX_CONTAINER_THRESHOLD, MIN_THRESHOLD, image_score, normalized_image_name
from k8py.scheduler.plugins.node_affinity import match_term, preferred_score, required_affinity
from k8py.scheduler.plugins.node_name import fits as node_name_fits
from k8py.scheduler.plugins.node_ports import ports_conflict
from k8py.scheduler.plugins.node_resources_fit import (
    NodeResourcesFit, insufficient_resources, least_allocated, most_allocated, requested_to_capacity_ratio)
from k8py.scheduler.plugins.node_unschedulable import fits as unschedulable_fits
from k8py.scheduler.plugins.scheduling_gates import gates_status
from k8py.scheduler.plugins.taint_toleration import count_intolerable, default_normalize, first_untolerated, tolerates, untolerated_reason
from tests.scheduler.unit.helpers import node_info, pod_info


@pytest.mark.parametrize("spec, cpu, memory", [
    ({"containers": [{"resources": {"requests": {"cpu": "100m", "memory": "1Gi"}}},
                     {"resources": {"requests": {"cpu": "200m"}}}]}, 300, 2**30),
    # an init container bigger than the sum wins
    ({"containers": [{"resources": {"requests": {"cpu": "100m"}}}],
      "initContainers": [{"resources": {"requests": {"cpu": "1"}}}]}, 1000, 0),
    # sidecars (restartPolicy Always) run beside the containers and later init containers
    ({"containers": [{"resources": {"requests": {"cpu": "100m"}}}],
      "initContainers": [{"restartPolicy": "Always", "resources": {"requests": {"cpu": "200m"}}},
                         {"resources": {"requests": {"cpu": "500m"}}}]}, 700, 0),
    # overhead is added on top
    ({"containers": [{"resources": {"requests": {"cpu": "100m"}}}], "overhead": {"cpu": "50m", "memory": "10Mi"}}, 150, 10 * 2**20),
    # limits without requests count as requests
    ({"containers": [{"resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}]}, 2000, 2**30),
])
def test_pod_requests_follow_upstream(spec, cpu, memory):
    r = pod_requests({"spec": spec})
    assert (r.milli_cpu, r.memory) == (cpu, memory)


@pytest.mark.parametrize("spec", [
    {"containers": [{"resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]},
    {"containers": [{}, {"resources": {"requests": {"cpu": "200m"}}}, {"resources": {"requests": {"memory": "1Gi"}}}]},
    {"containers": [{"resources": {"limits": {"cpu": "2", "memory": "1Gi", "example.com/gpu": "1"},
                                   "requests": {"cpu": "1"}}}]},
    {"containers": [{"resources": {"requests": {"ephemeral-storage": "1Gi", "hugepages-2Mi": "4Mi"}}}]},
    {"containers": [{"resources": {"requests": {"cpu": "100m"}}}], "initContainers": [{"resources": {"requests": {"cpu": "1"}}}]},
    {"containers": [{"resources": {"requests": {"cpu": "100m"}}}],
     "initContainers": [{"restartPolicy": "Always", "resources": {"requests": {"cpu": "200m"}}}, {}]},
    {"containers": [{}], "overhead": {"cpu": "50m", "memory": "10Mi"}},
    {},
])
def test_pod_requests_pair_is_both_readings_of_pod_requests(spec):
    from k8py.scheduler.framework.resources import pod_requests_pair

    def fields(r):
        return (r.milli_cpu, r.memory, r.ephemeral, r.pods, r.scalar)

    requests, non_zero = pod_requests_pair({"spec": spec})
    assert fields(requests) == fields(pod_requests({"spec": spec}))
    assert fields(non_zero) == fields(pod_requests({"spec": spec}, non_zero=True))


def test_non_zero_requests_default_what_is_unset():
    r = pod_requests({"spec": {"containers": [{}]}}, non_zero=True)
    assert (r.milli_cpu, r.memory) == (100, 200 * 2**20)


@pytest.mark.parametrize("pod_kw, node_kw, existing, reasons", [
    ({"cpu": "1"}, {"cpu": "2"}, [], []),
    ({"cpu": "3"}, {"cpu": "2"}, [], ["Insufficient cpu"]),
    ({"cpu": "1", "memory": "9Gi"}, {"cpu": "2", "memory": "8Gi"}, [], ["Insufficient memory"]),
    ({"cpu": "3", "memory": "9Gi"}, {"cpu": "2", "memory": "8Gi"}, [], ["Insufficient cpu", "Insufficient memory"]),
    ({"cpu": "1"}, {"cpu": "2"}, [{"cpu": "1500m"}], ["Insufficient cpu"]),
    ({}, {"pods": 1}, [{}], ["Too many pods"]),
    ({}, {"cpu": "1"}, [{"cpu": "2"}], []),  # a pod asking for nothing fits an overcommitted node
])
def test_insufficient_resources(pod_kw, node_kw, existing, reasons):
    pods = [pod_info(f"e{i}", **kw) for i, kw in enumerate(existing)]
    node = node_info("n", *pods, **node_kw)
    assert insufficient_resources(pod_info(**pod_kw).requests, node) == reasons


def test_extended_resources_must_be_allocatable():
    p = pod_info()
    p.requests.scalar["example.com/gpu"] = 1
    assert insufficient_resources(p.requests, node_info()) == ["Insufficient example.com/gpu"]
    assert insufficient_resources(p.requests, node_info(), ignored=frozenset({"example.com/gpu"})) == []
    assert insufficient_resources(p.requests, node_info(), ignored_groups=frozenset({"example.com"})) == []


@pytest.mark.parametrize("fn, requested, capacity, score", [
    (least_allocated, 0, 100, 100), (least_allocated, 25, 100, 75), (least_allocated, 150, 100, 0), (least_allocated, 5, 0, 0),
    (most_allocated, 25, 100, 25), (most_allocated, 150, 100, 100), (most_allocated, 1, 0, 0),
])
def test_allocation_scorers(fn, requested, capacity, score):
    assert fn(requested, capacity) == score


def test_requested_to_capacity_ratio_interpolates_the_shape():
    fn = requested_to_capacity_ratio([(0, 0), (100, 10)])
    assert [fn(r, 100) for r in (0, 50, 100)] == [0, 50, 100]
    assert fn(200, 100) == 100  # over capacity reads as full


def test_least_allocated_batch_score_matches_the_per_node_score():
    plugin = NodeResourcesFit()
    p = pod_info(cpu="500m", memory="1Gi")
    nodes = [node_info("a", cpu="2", memory="4Gi"), node_info("b", pod_info("x", cpu="1"), cpu="4", memory="8Gi")]
    assert plugin.score_nodes(None, p, nodes) == [plugin.score(None, p, n) for n in nodes]


@pytest.mark.parametrize("fractions, score", [([0.5, 0.5], 100), ([0.0, 1.0], 50), ([0.2, 0.6], 80), ([], 0)])
def test_balanced_allocation(fractions, score):
    assert balanced_score(fractions) == score


@pytest.mark.parametrize("toleration, taint, ok", [
    ({"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}, {"key": "k", "value": "v", "effect": "NoSchedule"}, True),
    ({"key": "k", "value": "w"}, {"key": "k", "value": "v", "effect": "NoSchedule"}, False),
    ({"key": "k", "operator": "Exists"}, {"key": "k", "value": "v", "effect": "NoExecute"}, True),
    ({"operator": "Exists"}, {"key": "anything", "effect": "NoSchedule"}, True),
    ({"key": "k", "operator": "Exists", "effect": "NoExecute"}, {"key": "k", "effect": "NoSchedule"}, False),
])
def test_tolerates(toleration, taint, ok):
    assert tolerates(toleration, taint) is ok


def test_untolerated_taint_reason_and_prefer_no_schedule_count():
    taints = [{"key": "a", "value": "1", "effect": "NoSchedule"}, {"key": "b", "value": "2", "effect": "NoSchedule"}]
    first = first_untolerated(taints, [{"key": "a", "operator": "Exists"}])
    assert untolerated_reason(first) == "node(s) had untolerated taint {b: 2}"
    prefer = [{"key": "x", "effect": "PreferNoSchedule"}, {"key": "y", "effect": "PreferNoSchedule"}]
    assert count_intolerable(prefer, [{"key": "x", "operator": "Exists"}]) == 1
    scores = [0, 1, 2]
    default_normalize(scores, reverse=True)
    assert scores == [100, 50, 0]


@pytest.mark.parametrize("term, labels, name, ok", [
    ({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}, {"zone": "a"}, "n", True),
    ({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}, {}, "n", True),
    ({"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["3"]}]}, {"gen": "4"}, "n", True),
    ({"matchExpressions": [{"key": "gen", "operator": "Lt", "values": ["3"]}]}, {"gen": "x"}, "n", False),
    ({"matchExpressions": [{"key": "ssd", "operator": "DoesNotExist"}]}, {"ssd": ""}, "n", False),
    ({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}, {}, "n", True),
    ({}, {"zone": "a"}, "n", False),  # an empty term matches nothing
])
def test_node_selector_terms(term, labels, name, ok):
    assert match_term(term, labels, name) is ok


def test_required_affinity_ands_the_selector_and_ors_the_terms():
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]}}}
    req = required_affinity(pod_info(nodeSelector={"disk": "ssd"}, affinity=affinity))
    assert req.match({"disk": "ssd", "zone": "b"}, "n")
    assert not req.match({"disk": "hdd", "zone": "b"}, "n")
    assert not req.match({"disk": "ssd", "zone": "c"}, "n")
    assert preferred_score([{"weight": 3, "preference": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}},
                            {"weight": 5, "preference": {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}}],
                           {"zone": "a"}, "n") == 3


@pytest.mark.parametrize("wanted, used, conflict", [
    ([("0.0.0.0", "TCP", 80)], {}, False),
    ([("0.0.0.0", "TCP", 80)], {("TCP", 80): {"10.0.0.1": 1}}, True),
    ([("10.0.0.2", "TCP", 80)], {("TCP", 80): {"10.0.0.1": 1}}, False),
    ([("10.0.0.2", "TCP", 80)], {("TCP", 80): {"0.0.0.0": 1}}, True),
    ([("0.0.0.0", "UDP", 80)], {("TCP", 80): {"0.0.0.0": 1}}, False),
])
def test_host_port_conflicts(wanted, used, conflict):
    assert ports_conflict(wanted, used) is conflict


def test_small_plugins():
    assert node_name_fits(pod_info(nodeName="a"), node_info("a"))
    assert not node_name_fits(pod_info(nodeName="a"), node_info("b"))
    assert unschedulable_fits(pod_info(), False)
    assert not unschedulable_fits(pod_info(), True)
    assert unschedulable_fits(pod_info(tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]), True)
    assert gates_status(pod_info()) is None
    assert gates_status(pod_info(schedulingGates=[{"name": "a"}, {"name": "b"}])).message() == "waiting for scheduling gates: [a b]"
    assert normalized_image_name("nginx") == "nginx:latest"
    assert normalized_image_name("registry:5000/app@sha256:abc") == "registry:5000/app@sha256:abc"
    assert image_score(0, 1) == 0
    assert image_score(MAX_CONTAINER_THRESHOLD, 1) == 100
    assert 0 < image_score((MIN_THRESHOLD + MAX_CONTAINER_THRESHOLD) // 2, 1) < 100
