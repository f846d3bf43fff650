"""KubeSchedulerConfiguration parsing and profile building."""

from __future__ import annotations

import pytest

from k8py.scheduler.profile import build_frameworks, parse_config
from k8py.scheduler.profile.config import parse_duration


def test_defaults_give_upstream_plugins_and_weights():
    config = parse_config({})
    fwk = build_frameworks(config, None)["default-scheduler"]
    assert [p.name for p in fwk.points["filter"]] == [
        "NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit",
        "PodTopologySpread", "InterPodAffinity"]
    assert fwk.weights == {"TaintToleration": 3, "NodeAffinity": 2, "NodeResourcesFit": 1, "PodTopologySpread": 2,
                           "InterPodAffinity": 2, "NodeResourcesBalancedAllocation": 1, "ImageLocality": 1}
    assert [p.name for p in fwk.points["postFilter"]] == ["DefaultPreemption"]
    assert config.leader_election.lease_duration == 15.0


def test_profiles_enable_disable_and_weight_plugins():
    doc = {
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "percentageOfNodesToScore": 30,
        "leaderElection": {"leaderElect": True, "leaseDuration": "4s", "renewDeadline": "3s", "retryPeriod": "500ms"},
        "profiles": [
            {"schedulerName": "default-scheduler"},
            {"schedulerName": "packer",
             "plugins": {"score": {"disabled": [{"name": "*"}], "enabled": [{"name": "NodeResourcesFit", "weight": 5}]},
                         "postFilter": {"disabled": [{"name": "DefaultPreemption"}]}},
             "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}]},
        ],
    }
    config = parse_config(doc)
    assert config.leader_election.retry_period == 0.5
    frameworks = build_frameworks(config, None)
    packer = frameworks["packer"]
    assert [p.name for p in packer.points["score"]] == ["NodeResourcesFit"]
    assert packer.weights == {"NodeResourcesFit": 5}
    assert packer.plugins["NodeResourcesFit"].strategy == "MostAllocated"
    assert packer.points["postFilter"] == []
    assert packer.percentage_of_nodes_to_score == 30


@pytest.mark.parametrize("doc, message", [
    ({"kind": "Other"}, "kind: expected KubeSchedulerConfiguration"),
    ({"percentageOfNodesToScore": 101}, "percentageOfNodesToScore: Invalid value: 101"),
    ({"profiles": [{"schedulerName": "a"}, {"schedulerName": "a"}]}, "Duplicate value"),
    ({"leaderElection": {"leaseDuration": "soon"}}, "leaderElection.leaseDuration: invalid duration"),
])
def test_bad_configuration_says_which_field(doc, message):
    with pytest.raises(ValueError, match=message):
        parse_config(doc)


def test_unknown_plugin_is_named():
    config = parse_config({"profiles": [{"plugins": {"filter": {"enabled": [{"name": "Nope"}]}}}]})
    with pytest.raises(ValueError, match="plugin 'Nope' does not exist"):
        build_frameworks(config, None)


def test_durations():
    assert parse_duration("1m30s", "x") == 90
    assert parse_duration(5, "x") == 5


def test_client_connection_sets_the_events_rate_with_upstreams_defaults():
    assert (parse_config({}).client_qps, parse_config({}).client_burst) == (50.0, 100)
    config = parse_config({"clientConnection": {"qps": 5, "burst": 7}})
    assert (config.client_qps, config.client_burst) == (5.0, 7)
    with pytest.raises(ValueError, match="clientConnection"):
        parse_config({"clientConnection": {"qps": 0}})
