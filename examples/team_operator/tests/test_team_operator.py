"""The team operator's own suite, on a k8py cluster from the pytest plugin
(``pip install k8py`` is all it needs: the ``k8py_cluster`` and
``k8py_namespace`` fixtures come with it)."""

from __future__ import annotations

import os
import sys
import threading
import time

import kubernetes
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import team_operator  # noqa: E402


@pytest.fixture(scope="session")
def operator(k8py_cluster):
    stop = threading.Event()
    thread = threading.Thread(target=team_operator.run, args=(k8py_cluster.kubernetes_client, stop), name="team-operator", daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join(30)


def eventually(check, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except (AssertionError, kubernetes.client.ApiException):
            if time.monotonic() > deadline:
                raise
        time.sleep(0.1)


def team_of(core, namespace):
    return core.read_namespaced_config_map("team-info", namespace).data["team"]


def test_a_labelled_namespace_gets_its_team_configmap(operator, k8py_cluster, k8py_namespace):
    k8py_cluster.kubectl("label", "namespace", k8py_namespace, "team=payments")
    core = kubernetes.client.CoreV1Api(k8py_cluster.kubernetes_client)
    assert eventually(lambda: team_of(core, k8py_namespace)) == "payments"


def test_relabelling_updates_it_and_unlabelling_removes_it(operator, k8py_cluster, k8py_namespace):
    core = kubernetes.client.CoreV1Api(k8py_cluster.kubernetes_client)
    k8py_cluster.kubectl("label", "namespace", k8py_namespace, "team=search")
    assert eventually(lambda: team_of(core, k8py_namespace)) == "search"
    k8py_cluster.kubectl("label", "namespace", k8py_namespace, "team=ads", "--overwrite")
    eventually(lambda: team_of(core, k8py_namespace) == "ads" or (_ for _ in ()).throw(AssertionError("still search")))
    k8py_cluster.kubectl("label", "namespace", k8py_namespace, "team-")

    def gone():
        out = k8py_cluster.kubectl("get", "configmap", "team-info", "-n", k8py_namespace, check=False)
        assert out.returncode != 0 and "NotFound" in out.stderr, out.stdout

    eventually(gone)


def test_an_unlabelled_namespace_gets_none(operator, k8py_cluster, k8py_namespace):
    k8py_cluster.kubectl("create", "configmap", "marker", "-n", k8py_namespace)
    names = [c.metadata.name for c in kubernetes.client.CoreV1Api(k8py_cluster.kubernetes_client).list_namespaced_config_map(k8py_namespace).items]
    assert "team-info" not in names
