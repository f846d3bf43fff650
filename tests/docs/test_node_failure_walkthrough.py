"""docs/16-node-failure.md: its Verification section, run as written, on a real
``k8py up`` of three process nodes with the doc's own ``cluster.yaml``.

Each ``$`` line runs under bash (:mod:`tests.support.doc_steps`) with ``WORK``
a temporary directory holding the config file taken from the doc (its first
``yaml`` block, so the doc and the test cannot drift), ``KUBECONFIG`` the
cluster's and ``k8py`` this checkout's. The doc's commands wait on conditions
themselves (``kubectl wait``, ``until`` loops under ``timeout``), never on a
clock. A frozen kubelet is thawed and the cluster stopped whatever happens.
"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest

from k8py.cluster.state import read_state
from tests.support.doc_steps import k8py_shim, run_step, verification_steps
from tests.support.kube import KUBECTL

pytestmark = [pytest.mark.kubectl, pytest.mark.slow,
              pytest.mark.skipif(not os.path.exists(KUBECTL), reason="kubectl not installed")]

DOC = Path(__file__).resolve().parents[2] / "docs" / "16-node-failure.md"


def cluster_yaml(text: str) -> str:
    return re.search(r"```yaml\n(.*?)```", text, re.S).group(1)


def test_the_walkthrough_parses_into_steps_that_freeze_and_thaw_one_kubelet():
    text = DOC.read_text()
    steps = verification_steps(text)
    commands = [c for c, _ in steps]
    assert commands[0].startswith("k8py up --detach") and commands[-1].startswith("k8py down")
    assert sum("kill -STOP" in c for c in commands) == 1 and sum("kill -CONT" in c for c in commands) == 1
    assert "kind: Cluster" in cluster_yaml(text) and "nodes: 3" in cluster_yaml(text)


def _thaw(data: str) -> None:
    """The kubelet a failed step left frozen: a stopped process would outlive k8py down's SIGTERM."""
    for name, comp in ((read_state(data) or {}).get("components") or {}).items():
        if name.startswith("kubelet/") and comp.get("pid"):
            try:
                os.kill(comp["pid"], signal.SIGCONT)
            except OSError:
                pass


@pytest.mark.timeout(900)
def test_the_node_failure_walkthrough_verification_runs_as_written(tmp_path):
    text = DOC.read_text()
    work = tmp_path / "work"
    work.mkdir()
    (work / "cluster.yaml").write_text(cluster_yaml(text))
    home = tmp_path / "home"
    home.mkdir()
    data = str(work / "cluster")
    env = {**os.environ, "HOME": str(home), "WORK": str(work), "KUBECONFIG": os.path.join(data, "kubeconfig"),
           "PATH": k8py_shim(tmp_path / "bin")}
    try:
        for command, expected in verification_steps(text):
            missing, output = run_step(command, expected, env, timeout=240)
            assert not missing, f"$ {command}\nexpected {missing}\ngot:\n" + "\n".join(output)
    finally:
        if os.path.exists(os.path.join(data, "cluster.json")):
            _thaw(data)
            run_step(f"k8py down --data-dir {data}", [], env, timeout=120)
