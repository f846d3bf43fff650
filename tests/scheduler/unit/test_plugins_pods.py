"""Table tests for the plugins that look at other pods: InterPodAffinity,
PodTopologySpread, DefaultPreemption."""

from __future__ import annotations

import pytest

from k8py.scheduler.framework.interfaces import CycleState
from k8py.scheduler.framework.status import Code
from k8py.scheduler.plugins.default_preemption import Candidate, eligible_to_preempt, pick_one_node, select_victims_on_node
from k8py.scheduler.plugins.inter_pod_affinity import (REASON_AFFINITY, REASON_ANTI_AFFINITY, REASON_EXISTING_ANTI_AFFINITY,
                                                        compute_state, normalize_min_max, satisfies)
from k8py.scheduler.plugins.spread_constraints import (REASON_CONSTRAINTS, REASON_MISSING_LABEL, check_node, constraints_of,
                                                        score_for_count, spread_state)
from k8py.scheduler.profile import SchedulerConfig, build_frameworks
from tests.scheduler.unit.helpers import node_info, pod_info

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def _anti(selector, key=HOST):
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": selector}, "topologyKey": key}]}}


def _affinity(selector, key=ZONE):
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": selector}, "topologyKey": key}]}}


@pytest.mark.parametrize("incoming, existing_on_a, node, reason", [
    # anti-affinity against a pod on the same host
    (dict(labels={"app": "web"}, affinity=_anti({"app": "web"})), [dict(labels={"app": "web"})], "a", REASON_ANTI_AFFINITY),
    (dict(labels={"app": "web"}, affinity=_anti({"app": "web"})), [dict(labels={"app": "web"})], "b", None),
    # an existing pod's anti-affinity rejects the incoming pod
    (dict(labels={"app": "web"}), [dict(labels={"app": "db"}, affinity=_anti({"app": "web"}))], "a", REASON_EXISTING_ANTI_AFFINITY),
    (dict(labels={"app": "other"}), [dict(labels={"app": "db"}, affinity=_anti({"app": "web"}))], "a", None),
    # affinity to a pod in the zone
    (dict(affinity=_affinity({"app": "db"})), [dict(labels={"app": "db"})], "b", None),  # b shares a's zone
    (dict(affinity=_affinity({"app": "db"})), [dict(labels={"app": "db"})], "c", REASON_AFFINITY),
    # affinity with no matching pod anywhere: only a pod matching its own terms may start the group
    (dict(labels={"app": "db"}, affinity=_affinity({"app": "db"})), [], "c", None),
    (dict(labels={"app": "x"}, affinity=_affinity({"app": "db"})), [], "c", REASON_AFFINITY),
])
def test_inter_pod_affinity_filter(incoming, existing_on_a, node, reason):
    existing = [pod_info(f"e{i}", **kw) for i, kw in enumerate(existing_on_a)]
    nodes = {"a": node_info("a", *existing, labels={ZONE: "z1"}), "b": node_info("b", labels={ZONE: "z1"}),
             "c": node_info("c", labels={ZONE: "z2"})}
    pod = pod_info("incoming", **incoming)
    state = compute_state(pod, list(nodes.values()))
    status = satisfies(state, nodes[node])
    assert (status.message() if status else None) == reason


def test_anti_affinity_terms_respect_namespaces():
    other_ns = pod_info("e", labels={"app": "web"}, namespace="other")
    nodes = [node_info("a", other_ns)]
    pod = pod_info("p", labels={"app": "web"}, affinity=_anti({"app": "web"}))
    assert satisfies(compute_state(pod, nodes), nodes[0]) is None  # the term selects the pod's own namespace only


def test_normalize_min_max():
    scores = [-5, 0, 5]
    normalize_min_max(scores)
    assert scores == [0, 50, 100]


def _spread_pod(name="p", max_skew=1, key=ZONE, hard=True, **kw):
    c = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway",
         "labelSelector": {"matchLabels": {"app": "s"}}}
    return pod_info(name, labels={"app": "s"}, topologySpreadConstraints=[c], **kw)


@pytest.mark.parametrize("counts, max_skew, target, reason", [
    ({"z1": 1, "z2": 0}, 1, "z1", REASON_CONSTRAINTS),  # 1+1-0 = 2 > 1
    ({"z1": 1, "z2": 0}, 1, "z2", None),
    ({"z1": 1, "z2": 0}, 2, "z1", None),
    ({"z1": 2, "z2": 1}, 1, "z2", None),
])
def test_topology_spread_filter(counts, max_skew, target, reason):
    nodes = {}
    for zone, n in counts.items():
        pods = [pod_info(f"{zone}-{i}", labels={"app": "s"}) for i in range(n)]
        nodes[zone] = node_info(f"node-{zone}", *pods, labels={ZONE: zone})
    pod = _spread_pod(max_skew=max_skew)
    state = spread_state(pod, list(nodes.values()), constraints_of(pod))
    status = check_node(state, nodes[target])
    assert (status.message() if status else None) == reason


def test_topology_spread_missing_label_and_min_domains():
    pod = _spread_pod()
    labelled, bare = node_info("a", labels={ZONE: "z1"}), node_info("b")
    state = spread_state(pod, [labelled, bare], constraints_of(pod))
    assert check_node(state, bare).message() == REASON_MISSING_LABEL
    assert check_node(state, bare).code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    c = {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule", "minDomains": 3,
         "labelSelector": {"matchLabels": {"app": "s"}}}
    pod = pod_info("m", labels={"app": "s"}, topologySpreadConstraints=[c])
    a = node_info("a", pod_info("x", labels={"app": "s"}), labels={ZONE: "z1"})
    b = node_info("b", pod_info("y", labels={"app": "s"}), labels={ZONE: "z2"})
    state = spread_state(pod, [a, b], constraints_of(pod))
    assert state.min_match(0) == 0  # fewer domains than minDomains: the global minimum is 0
    assert check_node(state, a) is not None


def test_default_constraints_apply_only_to_controlled_pods():
    owned = pod_info("o", labels={"app": "x"})
    owned.pod["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "name": "rs", "controller": True, "uid": "u"}]
    defaults = [{"topologyKey": HOST, "whenUnsatisfiable": "ScheduleAnyway", "maxSkew": 3}]
    assert [c.key for c in constraints_of(owned, defaults)] == [HOST]
    assert constraints_of(pod_info("free", labels={"app": "x"}), defaults) == []
    assert score_for_count(2, 3, 1.5) == 5.0


class _Handle:
    def __init__(self, nodes):
        self.nodes = nodes

    def node(self, name):
        return next((n for n in self.nodes if n.name == name), None)

    def image_node_count(self, image):
        return 0


def test_select_victims_keeps_the_pods_it_can_and_reprieves_the_most_important():
    low1 = pod_info("low1", cpu="1")
    low1.priority = 1
    low2 = pod_info("low2", cpu="1")
    low2.priority = 2
    high = pod_info("high", cpu="1")
    high.priority = 100
    node = node_info("n", low1, low2, high, cpu="3")
    preemptor = pod_info("preemptor", cpu="1")
    preemptor.priority = 50
    fwk = build_frameworks(SchedulerConfig(), _Handle([node]))["default-scheduler"]
    state = CycleState()
    fwk.run_pre_filter(state, preemptor, [node])
    victims, status = select_victims_on_node(fwk, state, preemptor, node, fwk.run_filter_plugins)
    assert status is None
    assert [v.name for v in victims] == ["low1"]  # removing the least important one is enough
    assert len(node.pods) == 3  # the real node view is untouched


def test_no_lower_priority_pods_means_no_victims():
    node = node_info("n", pod_info("same", cpu="2"), cpu="2")
    preemptor = pod_info("p", cpu="1")
    fwk = build_frameworks(SchedulerConfig(), _Handle([node]))["default-scheduler"]
    victims, status = select_victims_on_node(fwk, CycleState(), preemptor, node, fwk.run_filter_plugins)
    assert victims == [] and status.message() == "No preemption victims found for incoming pod"


def test_pick_one_node_prefers_lower_victim_priority_then_fewer_victims():
    def victim(name, prio):
        p = pod_info(name)
        p.priority = prio
        return p
    a = Candidate("a", [victim("a1", 10)])
    b = Candidate("b", [victim("b1", 5), victim("b2", 5)])
    c = Candidate("c", [victim("c1", 5)])
    assert pick_one_node([a, b, c]).node == "c"
    assert pick_one_node([]) is None


def test_preemption_policy_never_is_not_eligible():
    assert eligible_to_preempt(pod_info(preemptionPolicy="Never"), lambda n: None) == "not eligible due to preemptionPolicy=Never."
    assert eligible_to_preempt(pod_info(), lambda n: None) == ""


def _spread_scores(plugin, pod, nodes):
    state = CycleState()
    if plugin.pre_score(state, pod, nodes) is not None:
        return None
    scores = [plugin.score(state, pod, n) for n in nodes]
    assert plugin.score_nodes(state, pod, nodes) == scores  # the batch form the framework calls
    plugin.normalize_score(state, pod, scores)
    return scores


def _owned(name, **kw):
    info = pod_info(name, labels={"app": "s"}, **kw)
    info.pod["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u",
                                                "controller": True}]
    return info


def test_system_default_spread_scores_zoneless_nodes_by_hostname():
    """Upstream's requireAllTopologies: under the System defaults a node without a zone label is
    still spread by hostname (the defaults' zone constraint adds nothing, and costs no pass over
    every node); with the pod's own constraints, or List defaulting, it is ignored (score 0)."""
    from k8py.scheduler.plugins.pod_topology_spread import PodTopologySpread

    busy = node_info("busy", *[_owned(f"e{i}") for i in range(3)])
    idle = node_info("idle")
    pod = _owned("incoming")
    # raw scores 3 * log(4) + 2 and 2, normalized as upstream: 100 * (6 + 2 - s) / 6
    assert _spread_scores(PodTopologySpread(), pod, [busy, idle]) == [33, 100]  # hostname spreading, no zones
    zoned = [node_info("busy", *[_owned(f"e{i}") for i in range(3)], labels={ZONE: "z1"}), node_info("idle", labels={ZONE: "z1"})]
    # plus the zone, the same for both: 3 * log(3) + 4; 13 and 9 normalized: 100 * (22 - 13) / 13
    assert _spread_scores(PodTopologySpread(), pod, zoned) == [69, 100]
    own = _owned("own", topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway",
                                                      "labelSelector": {"matchLabels": {"app": "s"}}}])
    assert _spread_scores(PodTopologySpread(), own, [busy, idle]) == [0, 0]  # no zone: both ignored
    listed = PodTopologySpread({"defaultingType": "List", "defaultConstraints": [
        {"topologyKey": HOST, "whenUnsatisfiable": "ScheduleAnyway", "maxSkew": 1},
        {"topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway", "maxSkew": 1}]})
    assert _spread_scores(listed, pod, [busy, idle]) == [0, 0]  # List defaults require every key


def test_spread_counts_kept_on_a_node_follow_its_pods():
    """The count of matching pods a node keeps for a workload's selector is read again only
    while the node's pods are unchanged: a pod added or deleted there is counted."""
    from k8py.scheduler.plugins.pod_topology_spread import PodTopologySpread

    busy, idle = node_info("busy", _owned("e0")), node_info("idle")
    plugin = PodTopologySpread()
    assert _spread_scores(plugin, _owned("p1"), [busy, idle]) == [_spread_scores(plugin, _owned("p2"), [busy, idle])[0], 100]
    idle.add_pod(_owned("e1").with_node("idle"))
    idle.add_pod(_owned("e2").with_node("idle"))
    scores = _spread_scores(plugin, _owned("p3"), [busy, idle])
    assert scores[0] == 100 and scores[1] < 100  # idle now holds more of the workload
    idle.remove_pod("default/e1")
    idle.remove_pod("default/e2")
    assert _spread_scores(plugin, _owned("p4"), [busy, idle])[1] == 100


@pytest.mark.parametrize("seed", range(12))
def test_spread_batch_score_matches_the_per_node_score(seed):
    """``score_nodes`` (what the framework calls) gives every node what ``score`` gives it: nodes
    with and without zones or hostnames, the workload's pods in two namespaces, and the System
    defaults, List defaults and the pod's own constraints, counts kept or not."""
    import random

    from k8py.scheduler.plugins.pod_topology_spread import PodTopologySpread

    rng = random.Random(seed)
    nodes = []
    for n in range(rng.randint(2, 30)):
        labels = {ZONE: f"z{rng.randint(0, 5)}"} if rng.random() < 0.7 else {}
        pods = [_owned(f"e{n}-{k}", namespace=rng.choice(["default", "other"])) for k in range(rng.choice([0, 0, 1, 4]))]
        info = node_info(f"n{n}", *pods, labels=labels)
        if rng.random() < 0.1:
            del info.labels[HOST]
        nodes.append(info)
    own = [{"maxSkew": rng.randint(1, 4), "topologyKey": key, "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app": "s"}}} for key in (HOST, ZONE)]
    plugins = [PodTopologySpread(), PodTopologySpread({"defaultingType": "List", "defaultConstraints": [
        {"topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway", "maxSkew": 2}]})]
    for plugin in plugins:
        for pod in (_owned("p"), _owned("q", namespace="other"), _owned("r", topologySpreadConstraints=own)):
            for _ in range(2):  # the second time from the counts kept on the nodes
                state = CycleState()
                assert plugin.pre_score(state, pod, nodes) is None
                assert plugin.score_nodes(state, pod, nodes) == [plugin.score(state, pod, n) for n in nodes]


def test_spread_counts_kept_from_the_cache_follow_its_changes():
    """With a cache, a workload's counts by hostname and by zone are kept from the cache's
    changes (pods assumed, added, removed, deleting); every cycle scores as counting from scratch."""
    import random

    from k8py.scheduler.cache import SchedulerCache
    from k8py.scheduler.plugins.pod_topology_spread import PodTopologySpread
    from tests.scheduler.conftest import node as node_obj

    rng = random.Random(7)
    cache = SchedulerCache()
    for n in range(12):
        obj = node_obj(f"n{n}", labels={ZONE: f"z{n % 3}"} if n % 4 else {})
        if n % 5 == 1:  # a zone, no hostname: its pods count for a zone only where not every key is required
            del obj["metadata"]["labels"][HOST]
        cache.add_node(obj)

    class Handle:
        def __init__(self) -> None:
            self.cache, self.nodes = cache, cache.nodes

    kept, fresh = PodTopologySpread(handle=Handle()), PodTopologySpread()
    placed: list[str] = []
    own = [{"maxSkew": 2, "topologyKey": key, "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": {"app": "s"}}}
           for key in (HOST, ZONE)]
    for step in range(60):
        # the System defaults' pods, and pods with their own constraints (every key required)
        spec = {"topologySpreadConstraints": own} if rng.random() < 0.3 else {}
        pod = _owned(f"p{step}", namespace=rng.choice(["default", "other"]), **spec)
        nodes = list(cache.nodes)
        scores = []
        for plugin in (kept, fresh):
            state = CycleState()
            assert plugin.pre_score(state, pod, nodes) is None
            scores.append(plugin.score_nodes(state, pod, nodes))
            assert scores[-1] == [plugin.score(state, pod, n) for n in nodes]
        assert scores[0] == scores[1], f"step {step}"
        action = rng.random()
        if action < 0.5 or not placed:
            cache.assume_pod(pod.with_node(rng.choice(nodes).name))
            placed.append(pod.key)
        elif action < 0.8:
            cache.remove_pod(placed.pop(rng.randrange(len(placed))))
        else:  # a placed pod starts deleting: no longer counted
            info = cache.pod(placed.pop(rng.randrange(len(placed))))
            deleting = {**info.pod, "metadata": {**info.pod["metadata"], "deletionTimestamp": "2026-12-06T00:00:00Z"}}
            cache.add_pod(deleting)
