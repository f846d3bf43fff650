"""docs/07-jobs-daemonsets-statefulsets.md: the Verification section, against a real
API server process, the real controller-manager, scheduler and simulated kubelet
processes, and the real kubectl."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.cluster.up_helpers import wait_for
from tests.support.kube import Kubectl
from tests.support.servers import ServerProcess

pytestmark = [pytest.mark.kubectl, pytest.mark.slow]

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "07-jobs-daemonsets-statefulsets.md")


def _manifests() -> list[str]:
    """The documented manifests, exactly as written (the heredocs of the doc)."""
    return re.findall(r"<<'EOF'\n(.*?)\nEOF\n", open(DOC).read(), re.S)


def test_walkthrough_verification_steps(tmp_path):
    render, broken, agent, db = _manifests()
    with ServerProcess(str(tmp_path / "batch")) as server:
        kubectl = Kubectl(server.url, str(tmp_path / "home"))
        kc = kubectl.kubeconfig
        commands = (["controller-manager", "--kubeconfig", kc, "--port", "0"],
                    ["scheduler", "--kubeconfig", kc, "--port", "0"],
                    ["kubelet", "--kubeconfig", kc, "--simulated", "--nodes", "3", "--node-name", "node",
                     "--root-dir", str(tmp_path / "kubelet"), "--port", "0"])
        procs = [subprocess.Popen([sys.executable, "-m", "k8py", *cmd], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for cmd in commands]
        try:
            for proc in procs:
                line = proc.stdout.readline()
                assert "/healthz" in line or "running" in line, line
            wait_for(lambda: len(json.loads(kubectl.run("get", "nodes", "-o", "json").stdout)["items"]) == 3, "3 nodes")

            def pods(label: str) -> list[dict]:
                items = json.loads(kubectl.run("get", "pods", "-l", label, "-o", "json").stdout)["items"]
                return [p for p in items if not p["metadata"].get("deletionTimestamp")]

            # 2. an Indexed Job completes
            kubectl.run("apply", "-f", "-", input=render)
            kubectl.run("wait", "--for=condition=complete", "job/render", "--timeout=90s", timeout=120)
            assert kubectl.run("get", "job", "render", "-o", "jsonpath={.status.completedIndexes}").stdout == "0-2"
            names = sorted(p["metadata"]["name"] for p in pods("job-name=render"))
            assert [n.rsplit("-", 1)[0] for n in names] == ["render-0", "render-1", "render-2"]

            # 3. a failing Job stops at its backoff limit
            kubectl.run("apply", "-f", "-", input=broken)
            kubectl.run("wait", "--for=condition=failed", "job/broken", "--timeout=90s", timeout=120)
            out = kubectl.run("get", "job", "broken", "-o",
                              'jsonpath={.status.failed} {.status.conditions[?(@.type=="Failed")].reason}').stdout
            assert out == "2 BackoffLimitExceeded"

            # 4. a DaemonSet: a pod per node; a NoExecute taint takes one away
            kubectl.run("create", "-f", "-", input=agent)
            kubectl.run("rollout", "status", "daemonset/agent", "--timeout=90s", timeout=120)
            assert sorted(p["spec"].get("nodeName") for p in pods("app=agent")) == ["node-0", "node-1", "node-2"]
            kubectl.run("taint", "node", "node-1", "maintenance=now:NoExecute")
            wait_for(lambda: sorted(p["spec"].get("nodeName") for p in pods("app=agent")) == ["node-0", "node-2"],
                     "the tainted node's pod to go")
            kubectl.run("taint", "node", "node-1", "maintenance-")
            wait_for(lambda: len(pods("app=agent")) == 3, "the pod to come back")

            # 5. a StatefulSet: ordered names, update, rollback
            kubectl.run("create", "-f", "-", input=db)
            kubectl.run("rollout", "status", "statefulset/db", "--timeout=90s", timeout=120)
            created = sorted(pods("app=db"), key=lambda p: (p["metadata"]["creationTimestamp"], p["metadata"]["name"]))
            assert [p["metadata"]["name"] for p in created] == ["db-0", "db-1", "db-2"]
            kubectl.run("set", "image", "statefulset/db", "db=db:2")
            kubectl.run("rollout", "status", "statefulset/db", "--timeout=90s", timeout=120)
            kubectl.run("rollout", "undo", "statefulset/db")
            kubectl.run("rollout", "status", "statefulset/db", "--timeout=90s", timeout=120)
            wait_for(lambda: {p["spec"]["containers"][0]["image"] for p in pods("app=db")} == {"db:1"}
                     and len(pods("app=db")) == 3, "db:1 again")
            history = kubectl.run("rollout", "history", "statefulset/db").stdout
            assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["2", "3"]
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                try:
                    proc.wait(20)
                finally:
                    if proc.poll() is None:
                        proc.kill()
