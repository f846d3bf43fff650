"""A lost node, with every part a real process: API server, ``k8py
controller-manager`` (node-monitor grace shortened by its flags), ``k8py
scheduler`` and two ``k8py kubelet --simulated`` processes, one node each.
The kubelet of the node running the pods is killed: the node goes Unknown
and is tainted, its pods are evicted (tolerationSeconds shortened in the pod
template) and replaced on the other node; the kubelet started again brings
the node back to Ready, untainted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from tests.support.kube import Kubectl
from tests.support.servers import ServerThread, sqlite_storage

pytestmark = pytest.mark.kubectl


def wait_for(check, what: str, timeout: float = 120):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not (result := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.3)
    return result


def _start(tmp_path: Any, name: str, *cmd: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-m", "k8py", *cmd], stdout=subprocess.PIPE,
                            stderr=open(tmp_path / f"{name}.log", "w"), text=True, env={**os.environ})
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert "/healthz" in line, line + (tmp_path / f"{name}.log").read_text()
    return proc


def _kubelet(tmp_path: Any, kc: str, prefix: str) -> subprocess.Popen[str]:
    return _start(tmp_path, f"kubelet-{prefix}", "kubelet", "--kubeconfig", kc, "--simulated", "--nodes", "1", "--node-name", prefix,
                  "--port", "0", "--root-dir", str(tmp_path / f"kubelet-{prefix}"),
                  "--node-status-update-frequency", "1", "--lease-renew-interval", "1")


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_a_killed_kubelet_loses_its_node_and_pods_which_come_back_elsewhere(tmp_path):
    with ServerThread(sqlite_storage(str(tmp_path / "data")), bookmark_interval=1.0) as server:
        kubectl = Kubectl(server.url, str(tmp_path / "home"))
        kc = kubectl.kubeconfig
        procs = [
            _start(tmp_path, "controller-manager", "controller-manager", "--kubeconfig", kc, "--port", "0",
                   "--node-monitor-period", "0.5", "--node-monitor-grace-period", "8"),
            _start(tmp_path, "scheduler", "scheduler", "--kubeconfig", kc, "--port", "0"),
        ]
        a = _kubelet(tmp_path, kc, "a")
        b: subprocess.Popen[str] | None = None
        try:
            wait_for(lambda: "a-0" in kubectl.run("get", "nodes").stdout, "node a-0")
            deployment = {
                "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
                "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "web", "image": "nginx:1"}],
                             "tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                                              "effect": "NoExecute", "tolerationSeconds": 3}]}}}}
            kubectl.run("apply", "-f", "-", input=json.dumps(deployment))
            kubectl.run("rollout", "status", "deployment/web", "--timeout=120s", timeout=150)
            b = _kubelet(tmp_path, kc, "b")  # the spare node joins only now: the pods are all on a-0

            def pods() -> list[dict[str, Any]]:
                return json.loads(kubectl.run("get", "pods", "-l", "app=web", "-o", "json").stdout)["items"]

            first = {p["metadata"]["name"] for p in pods()}
            assert {p["spec"]["nodeName"] for p in pods()} == {"a-0"}
            a.send_signal(signal.SIGKILL)
            a.wait()

            def node(name: str) -> dict[str, Any]:
                return json.loads(kubectl.run("get", "node", name, "-o", "json").stdout)

            def lost() -> dict[str, Any] | None:
                n = node("a-0")
                ready = next(c for c in n["status"]["conditions"] if c["type"] == "Ready")
                return n if ready["status"] == "Unknown" and len(n["spec"].get("taints") or []) == 2 else None
            n = wait_for(lost, "node a-0 Unknown and tainted")
            ready = next(c for c in n["status"]["conditions"] if c["type"] == "Ready")
            assert ready["message"] == "Kubelet stopped posting node status."
            assert {(t["key"], t["effect"]) for t in n["spec"]["taints"]} == {
                ("node.kubernetes.io/unreachable", "NoSchedule"), ("node.kubernetes.io/unreachable", "NoExecute")}

            def replaced() -> bool:
                items = pods()
                old = [p for p in items if p["metadata"]["name"] in first]
                new = [p for p in items if p["metadata"]["name"] not in first and not p["metadata"].get("deletionTimestamp")]
                return (all(p["metadata"].get("deletionTimestamp") for p in old)
                        and len(new) == 2 and all(p["spec"].get("nodeName") == "b-0" and p["status"].get("phase") == "Running" for p in new))
            wait_for(replaced, "pods evicted from a-0 and running on b-0")
            table = kubectl.run("get", "pods", "-l", "app=web").stdout
            assert "Terminating" in table  # as upstream shows pods on a lost node

            a = _kubelet(tmp_path, kc, "a")

            def back() -> bool:
                n = node("a-0")
                ready = next(c for c in n["status"]["conditions"] if c["type"] == "Ready")
                return ready["status"] == "True" and not n["spec"].get("taints")
            wait_for(back, "node a-0 Ready and untainted")
            wait_for(lambda: not [p for p in pods() if p["metadata"]["name"] in first], "the old pods finished by the kubelet back")
        finally:
            for proc in [a, *([b] if b else []), *procs]:
                _stop(proc)
