"""The pytest plugin and ``k8py.testing.Cluster``: the sample operator's suite
runs on it; the plugin is inert in a session that does not use it; the
async context manager starts and stops a cluster and leaves nothing behind."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys

import kubernetes
import pytest

from k8py.cluster.sweep import processes_of
from k8py.testing import Cluster

pytestmark = [pytest.mark.kubectl, pytest.mark.slow]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def plugin_args() -> list[str]:
    """``-p k8py.testing`` unless the entry point is installed (an editable
    install made before the plugin existed does not list it)."""
    registered = any(ep.value == "k8py.testing" for ep in importlib.metadata.entry_points(group="pytest11"))
    return [] if registered else ["-p", "k8py.testing"]


def run_pytest(*args: str, cwd: str = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *plugin_args(), *args],
                          capture_output=True, text=True, cwd=cwd, timeout=300)


def test_the_sample_operators_suite_passes_on_the_fixture():
    result = run_pytest("-q", "examples/team_operator/tests")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "3 passed" in result.stdout


def test_the_plugin_adds_its_options_and_starts_nothing_unless_asked(tmp_path):
    (tmp_path / "test_plain.py").write_text("def test_plain():\n    assert 1 + 1 == 2\n")
    help_text = run_pytest("--help", cwd=str(tmp_path)).stdout
    assert "--k8py-nodes" in help_text and "--k8py-simulated-nodes" in help_text and "--k8py-keep-cluster" in help_text
    result = run_pytest("-q", "--fixtures", cwd=str(tmp_path))
    assert "k8py_cluster [session scope]" in result.stdout and "k8py_namespace" in result.stdout
    plain = run_pytest("-q", "-s", str(tmp_path / "test_plain.py"), cwd=str(tmp_path))
    assert plain.returncode == 0 and "1 passed" in plain.stdout
    assert not list(tmp_path.glob("k8py*")) and not (tmp_path / ".k8py-pytest").exists()


async def test_the_async_context_manager_runs_simulated_nodes_and_cleans_up():
    async with Cluster(nodes=0, simulated_nodes=3) as cluster:
        data_dir = cluster.data_dir
        assert cluster.start_seconds > 0
        nodes = kubernetes.client.CoreV1Api(cluster.kubernetes_client).list_node().items
        assert len(nodes) == 3
        assert all(any(c.type == "Ready" and c.status == "True" for c in n.status.conditions) for n in nodes)
        ns = cluster.create_namespace()
        assert ns.startswith("test-") and cluster.kubectl("get", "namespace", ns).returncode == 0
    assert not os.path.exists(data_dir)
    assert processes_of(data_dir) == []
