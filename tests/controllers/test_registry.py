"""The registry: upstream's names, the --controllers syntax, lazy factories."""

import pytest

from k8py.controllers.registry import CONTROLLER_MODULES, UnknownControllerError, enabled_controllers, load_factory

UPSTREAM_NAMES = {"replicaset", "deployment", "job", "cronjob", "daemonset", "statefulset", "garbagecollector",
                  "namespace", "serviceaccount", "podgc", "nodeipam", "ttl-after-finished", "replicationcontroller"}


def test_every_upstream_name_is_known():
    assert UPSTREAM_NAMES <= set(CONTROLLER_MODULES)


def test_star_enables_everything_and_minus_disables_one():
    names = enabled_controllers("*,-cronjob")
    assert "cronjob" not in names and set(names) == set(CONTROLLER_MODULES) - {"cronjob"}
    assert UPSTREAM_NAMES - {"cronjob"} <= set(names)


def test_a_single_name_enables_only_that_one():
    assert enabled_controllers("replicaset") == ["replicaset"]


def test_an_unknown_name_is_refused_with_the_known_ones():
    with pytest.raises(UnknownControllerError, match="known controllers: .*replicaset"):
        enabled_controllers("*,-replicasets")


def test_a_missing_module_is_unavailable_not_an_error(monkeypatch):
    monkeypatch.setitem(CONTROLLER_MODULES, "replicaset", "k8py.controllers.no_such_module")
    assert load_factory("replicaset") is None
