"""A stopped ``k8py up`` leaves no cgroup behind, and ``k8py down`` cleans up after a killed one.

The kubelet's cgroup tree (``k8py-<node>-<tag>``, below the kubelet's own cgroup: for the
controllers a harness does not confine, the machine's root) outlives the kubelet on purpose
(its containers do, for adoption). Once ``k8py up`` has stopped and swept the containers the
tree is empty, and nothing else would remove it: the pytest plugin's clusters (SIGTERM, then
the data directory removed) left one per node. Root only (cgroups writable).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from k8py.cluster.state import read_state
from k8py.cluster.sweep import processes_of
from k8py.testing.cluster import Cluster
from tests.cluster.up_helpers import k8py

pytestmark = [pytest.mark.kubectl, pytest.mark.slow]


def _owner_bases(data_dir: str) -> dict[str, str]:
    with open(os.path.join(data_dir, "kubelet", "k8py-node-0", "owner.json"), encoding="utf-8") as f:
        return dict(json.load(f).get("cgroupBases") or {})


def _running_pod(cluster: Cluster) -> None:
    cluster.kubectl("run", "sleeper", "--image=busybox", "--restart=Never", "--", "sleep", "3600")
    deadline = time.monotonic() + 120
    while cluster.kubectl("get", "pod", "sleeper", "-o", "jsonpath={.status.phase}", check=False).stdout != "Running":
        assert time.monotonic() < deadline, "the pod never ran"
        time.sleep(0.2)


def _container_dirs(bases: dict[str, str]) -> list[str]:
    return [root for base in bases.values() for root, dirs, _ in os.walk(base) if not dirs and root != base]


@pytest.fixture
def cgroups_writable() -> None:
    if os.geteuid() != 0 or not os.path.isdir("/sys/fs/cgroup/memory"):
        pytest.skip("no writable cgroup v1 hierarchy on this machine: the kubelet records limits only")


def test_a_stopped_k8py_up_removes_its_kubelets_cgroup_tree(tmp_path, cgroups_writable) -> None:
    cluster = Cluster(data_dir=str(tmp_path / "cluster"))
    try:
        cluster.start()
        _running_pod(cluster)
        bases = _owner_bases(cluster.data_dir)
        assert bases and _container_dirs(bases), bases  # the pod's container has its cgroups
    finally:
        cluster.stop()  # SIGTERM to k8py up: components stopped, containers swept
    left = [b for b in bases.values() if os.path.isdir(b)]
    assert not left, f"k8py up stopped and left its kubelet's cgroup tree: {left}"


def test_k8py_down_with_nothing_running_still_removes_a_killed_clusters_tree(tmp_path, cgroups_writable) -> None:
    data = str(tmp_path / "cluster")
    proc = subprocess.Popen([sys.executable, "-m", "k8py", "up", "--data-dir", data, "--port", "0", "--no-follow-flow"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not (read_state(data) or {}).get("ready"):
            assert proc.poll() is None and time.monotonic() < deadline, "k8py up did not get ready"
            time.sleep(0.1)
        bases = {}
        cluster = Cluster(data_dir=data, keep=True).start()
        _running_pod(cluster)
        bases = _owner_bases(data)
        assert _container_dirs(bases), bases
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the supervisor, no stop of any kind
        proc.wait()
        # and every other process of the cluster, its container too, with no time to clean up
        deadline = time.monotonic() + 30
        while (left := processes_of(data)) and time.monotonic() < deadline:
            for pid in left:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.1)
    assert bases and all(os.path.isdir(b) for b in bases.values()), bases
    down = k8py("down", "--data-dir", data)
    assert down.returncode == 0 and "no cluster is running" in down.stdout, down.stdout + down.stderr
    left = [b for b in bases.values() if os.path.isdir(b)]
    assert not left, f"k8py down left the killed cluster's cgroup tree: {left}"
