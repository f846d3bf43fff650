"""docs/15-many-nodes.md: its Verification section, on a real ``k8py up
--simulated-nodes 50`` with the real kubectl."""

from __future__ import annotations

import functools
import re

import pytest

from k8py.cluster.state import read_state
from tests.cluster import up_helpers
from tests.support.kube import Kubectl

pytestmark = [pytest.mark.kubectl, pytest.mark.slow]


#: fifty nodes and 200 pods take minutes on a loaded machine
k8py = functools.partial(up_helpers.k8py, timeout=600)


@pytest.mark.timeout(900)
def test_15_many_nodes(tmp_path):
    data = str(tmp_path / "many")
    try:
        up = k8py("up", "--data-dir", data, "--port", "0", "--nodes", "0", "--simulated-nodes", "50", "--no-proxy", "--no-dns",
                  "--detach", "--timeout", "400")
        assert up.returncode == 0, up.stdout + up.stderr
        ready_lines = [line for line in up.stdout.splitlines() if "nodes Ready" in line]
        assert re.fullmatch(r"\[ *[\d.]+s\] 50/50 nodes Ready", ready_lines[-1]), up.stdout
        state = read_state(data)
        kubectl = Kubectl(state["api"], str(tmp_path / "home"), state["kubeconfig"])

        nodes = kubectl.run("get", "nodes", "--no-headers").stdout.splitlines()
        assert sum(" Ready " in line for line in nodes) == 50
        assert kubectl.run("create", "deployment", "many", "--image=nginx", "--replicas=200").stdout.strip() == \
            "deployment.apps/many created"
        rollout = kubectl.run("rollout", "status", "deployment/many", "--timeout=600s", timeout=660)
        assert rollout.stdout.splitlines()[-1] == 'deployment "many" successfully rolled out'
        running = kubectl.run("get", "pods", "--field-selector=status.phase=Running", "--no-headers").stdout.splitlines()
        assert len(running) == 200
        assert kubectl.run("delete", "deployment", "many").stdout.strip() == 'deployment.apps "many" deleted'
        down = k8py("down", "--data-dir", data)
        assert down.stdout.startswith(f"k8py down: stopped the cluster in {data}"), down.stdout + down.stderr
    finally:
        k8py("down", "--data-dir", data)
