"""The pytest side of :mod:`k8py.testing`: options and two fixtures.

Nothing here runs unless a test asks for ``k8py_cluster`` or
``k8py_namespace`` (no hooks besides ``pytest_addoption``), so an
environment where k8py is installed runs other suites unchanged.
"""

from __future__ import annotations

import os
from typing import Any, Iterator

import pytest

__all__ = ["pytest_addoption", "k8py_cluster", "k8py_namespace"]


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("k8py", "k8py cluster fixture")
    group.addoption("--k8py-nodes", type=int, default=1, help="kubelets (process runtime) in the k8py_cluster fixture (default: 1)")
    group.addoption("--k8py-simulated-nodes", type=int, default=0, help="simulated nodes in the k8py_cluster fixture (default: 0)")
    group.addoption("--k8py-keep-cluster", action="store_true", default=False,
                    help="keep the k8py_cluster running after the session (in ROOTDIR/.k8py-pytest) and reuse it next time")


@pytest.fixture(scope="session")
def k8py_cluster(request: Any) -> Iterator[Any]:
    """A running k8py cluster for the whole session (see :class:`k8py.testing.Cluster`)."""
    from k8py.testing.cluster import Cluster

    keep = request.config.getoption("--k8py-keep-cluster")
    data_dir = os.path.join(str(request.config.rootpath), ".k8py-pytest") if keep else None
    cluster = Cluster(nodes=request.config.getoption("--k8py-nodes"), simulated_nodes=request.config.getoption("--k8py-simulated-nodes"),
                      data_dir=data_dir, keep=keep)
    with cluster:
        yield cluster


@pytest.fixture
def k8py_namespace(k8py_cluster: Any) -> Iterator[str]:
    """A fresh namespace in ``k8py_cluster``, deleted (with its contents) after the test."""
    name = k8py_cluster.create_namespace()
    try:
        yield name
    finally:
        k8py_cluster.delete_namespace(name)
