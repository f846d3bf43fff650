"""The whole stack as processes: API server, ``k8py controller-manager``,
``k8py scheduler`` and a simulated ``k8py kubelet`` of 3 nodes; the real
kubectl rolls a Deployment out, updates it, rolls it back and deletes it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tests.support.kube import Kubectl
from tests.support.servers import ServerThread, sqlite_storage

pytestmark = pytest.mark.kubectl


def wait_for(check, what: str, timeout: float = 90):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not (result := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)
    return result


@pytest.fixture
def cluster(tmp_path):
    with ServerThread(sqlite_storage(str(tmp_path / "data")), bookmark_interval=1.0) as server:
        kubectl = Kubectl(server.url, str(tmp_path / "home"))
        kc = kubectl.kubeconfig
        commands = (
            ["controller-manager", "--kubeconfig", kc, "--port", "0"],
            ["scheduler", "--kubeconfig", kc, "--port", "0"],
            ["kubelet", "--kubeconfig", kc, "--simulated", "--nodes", "3", "--port", "0", "--root-dir", str(tmp_path / "kubelet")],
        )
        # stderr to files: an unread pipe would block a process once full
        procs = [subprocess.Popen([sys.executable, "-m", "k8py", *cmd], stdout=subprocess.PIPE,
                                  stderr=open(tmp_path / f"{cmd[0]}.log", "w"), text=True, env={**os.environ})
                 for cmd in commands]
        try:
            for proc in procs:
                line = proc.stdout.readline()
                assert "/healthz" in line, line + (tmp_path / f"{proc.args[3]}.log").read_text()
            yield kubectl
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                try:
                    assert proc.wait(20) == 0, proc.args
                finally:
                    if proc.poll() is None:
                        proc.kill()


def test_a_deployment_runs_rolls_back_and_goes_on_a_full_stack(cluster):
    kubectl = cluster
    kubectl.run("create", "deployment", "web", "--image=nginx:1", "--replicas=3")
    assert "successfully rolled out" in kubectl.run("rollout", "status", "deployment/web", "--timeout=90s", timeout=120).stdout

    def pods() -> list[dict]:
        items = json.loads(kubectl.run("get", "pods", "-l", "app=web", "-o", "json").stdout)["items"]
        return [p for p in items if not p["metadata"].get("deletionTimestamp")]

    running = pods()
    assert len(running) == 3 and all(p["status"]["phase"] == "Running" and p["spec"]["nodeName"] for p in running)
    nodes = json.loads(kubectl.run("get", "nodes", "-o", "json").stdout)["items"]
    cidrs = [n["spec"].get("podCIDR") for n in nodes]
    assert len(nodes) == 3 and len(set(cidrs)) == 3 and all(c and c.startswith("127.64.") for c in cidrs), cidrs

    kubectl.run("set", "image", "deployment/web", "nginx=nginx:2")
    kubectl.run("rollout", "status", "deployment/web", "--timeout=90s", timeout=120)
    kubectl.run("rollout", "undo", "deployment/web")
    kubectl.run("rollout", "status", "deployment/web", "--timeout=90s", timeout=120)
    images = {p["spec"]["containers"][0]["image"] for p in wait_for(lambda: len(pods()) == 3 and pods(), "3 pods")}
    assert images == {"nginx:1"}

    kubectl.run("delete", "deployment", "web")
    wait_for(lambda: not pods() and not json.loads(kubectl.run("get", "rs", "-o", "json").stdout)["items"], "the tree to go")
