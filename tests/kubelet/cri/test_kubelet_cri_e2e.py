"""``k8py kubelet --container-runtime-endpoint`` on a real containerd: a pod runs, succeeds, its logs read with kubectl;
a pod whose sandbox dies gets a new one and its restartCount goes on."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from typing import Callable, Iterator

import pytest

from k8py.kubelet.runtime.cri.client import CRIClient, pb
from tests.kubelet.conftest import Node, start_node
from tests.support.containerd import Containerd
from tests.support.kube import official_client
from tests.support.oci_registry import Registry, busybox_layer, image

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def cri_node(tmp_path_factory, containerd: Containerd) -> Iterator[Node]:
    tmp = str(tmp_path_factory.mktemp("cri-node"))
    server, kubelet, kubectl = start_node(tmp, extra=("--container-runtime-endpoint", containerd.endpoint,
                                                      "--cgroup-root", containerd.cgroup_parent,
                                                      "--runtime-relist-period", "0.3"))
    api = official_client(server.url)
    try:
        yield Node(server, kubelet, kubectl, api)
    finally:
        api.close()
        kubelet.stop()
        server.stop()


def sandboxes(ctrd: Containerd) -> list[str]:
    async def ids() -> list[str]:
        async with CRIClient(ctrd.endpoint) as cri:
            return [s.metadata.name for s in await cri.list_pod_sandbox()]
    return asyncio.run(ids())


def test_pod_runs_and_succeeds_through_containerd(cri_node: Node, containerd: Containerd, registry: Registry) -> None:
    ref = registry.push("k8py/e2e", "1", image([busybox_layer()]))
    node = cri_node.core.read_node("node-1")
    assert node.status.node_info.container_runtime_version.startswith("containerd://"), node.status.node_info
    cri_node.core.create_namespace({"metadata": {"name": "cri"}})
    cri_node.core.create_namespaced_pod("cri", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hello"},
        "spec": {"nodeName": "node-1", "restartPolicy": "Never", "containers": [{
            "name": "main", "image": ref, "command": ["/bin/sh", "-c"],
            "args": ["echo hello from containerd; echo pid1=$(cat /proc/1/comm); sleep 2; echo bye"],
            "resources": {"limits": {"memory": "64Mi"}}}]}})
    running = cri_node.wait_pod("cri", "hello", lambda p: p["status"].get("phase") == "Running", timeout=120, what="Running")
    cs = running["status"]["containerStatuses"][0]
    assert cs["containerID"].startswith("containerd://") and cs["imageID"].startswith(f"{registry.host}/k8py/e2e@sha256:")
    assert running["status"]["podIP"].startswith(containerd.subnet.rsplit(".", 1)[0] + ".")
    done = cri_node.wait_pod("cri", "hello", lambda p: p["status"].get("phase") == "Succeeded", timeout=120, what="Succeeded")
    term = done["status"]["containerStatuses"][0]["state"]["terminated"]
    assert term["exitCode"] == 0 and term["reason"] == "Completed", term
    deadline = time.monotonic() + 60
    while True:
        logs = cri_node.kubectl.run("logs", "-n", "cri", "hello", check=False)
        if logs.returncode == 0 and "bye" in logs.stdout or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert logs.stdout.splitlines() == ["hello from containerd", "pid1=sh", "bye"], logs
    assert "hello" in sandboxes(containerd)
    cri_node.core.delete_namespaced_pod("hello", "cri", grace_period_seconds=0)
    cri_node.wait_gone("cri", "hello", timeout=120)
    deadline = time.monotonic() + 60
    while "hello" in sandboxes(containerd) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "hello" not in sandboxes(containerd), "the kubelet left the pod's sandbox in containerd"


def test_a_wrong_endpoint_stops_the_kubelet_with_what_to_do(cri_node: Node, tmp_path) -> None:
    base = [sys.executable, "-m", "k8py", "kubelet", "--kubeconfig", cri_node.kubectl.kubeconfig, "--node-name", "node-bad",
            "--root-dir", str(tmp_path / "k"), "--port", "0"]
    r = subprocess.run(base + ["--container-runtime-endpoint", f"unix://{tmp_path}/absent.sock"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "no CRI runtime at unix://" in r.stderr and "is containerd running" in r.stderr, r
    r = subprocess.run(base + ["--container-runtime-endpoint", "tcp://127.0.0.1:1"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "expected unix:///absolute/path" in r.stderr, r


def test_exec_readiness_probe_runs_in_the_container(cri_node: Node, registry: Registry) -> None:
    ref = registry.push("k8py/probe", "1", image([busybox_layer()]))
    cri_node.core.create_namespace({"metadata": {"name": "cri-probe"}})
    cri_node.core.create_namespaced_pod("cri-probe", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probed"},
        "spec": {"nodeName": "node-1", "terminationGracePeriodSeconds": 1, "containers": [{
            "name": "main", "image": ref, "command": ["/bin/sh", "-c", "sleep 1; touch /tmp/ready; exec sleep 600"],
            # the file exists only inside the container's rootfs: the probe must run there
            "readinessProbe": {"exec": {"command": ["cat", "/tmp/ready"]}, "periodSeconds": 1}}]}})

    def ready(p: dict) -> bool:
        return any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or [])

    pod = cri_node.wait_pod("cri-probe", "probed", ready, timeout=120, what="Ready")
    cs = pod["status"]["containerStatuses"][0]
    # the same image as the first test's under another name: still this name, and never restarted as "changed"
    assert cs["ready"] is True and cs["restartCount"] == 0 and cs["image"] == ref, cs
    cri_node.core.delete_namespaced_pod("probed", "cri-probe", grace_period_seconds=1)
    cri_node.wait_gone("cri-probe", "probed", timeout=120)


def pause_pid(ctrd: Containerd, pod_name: str) -> int:
    """The pid of the pause process of the pod's ready sandbox (containerd's task of the sandbox's ID)."""
    async def sandbox_id() -> str:
        async with CRIClient(ctrd.endpoint) as cri:
            return next(s.id for s in await cri.list_pod_sandbox() if s.metadata.name == pod_name and s.state == pb.SANDBOX_READY)
    sid = asyncio.run(sandbox_id())
    tasks = subprocess.run(["ctr", "--address", ctrd.socket, "--namespace", "k8s.io", "tasks", "ls"], capture_output=True,
                           text=True, check=True, timeout=60).stdout.splitlines()
    return next(int(line.split()[1]) for line in tasks if line.startswith(sid))


def test_restart_count_goes_on_when_the_pod_gets_a_new_sandbox(cri_node: Node, containerd: Containerd, registry: Registry) -> None:
    ref = registry.push("k8py/sandbox", "1", image([busybox_layer()]))
    cri_node.core.create_namespace({"metadata": {"name": "cri-sandbox"}})
    cri_node.core.create_namespaced_pod("cri-sandbox", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "phoenix"},
        "spec": {"nodeName": "node-1", "terminationGracePeriodSeconds": 1, "containers": [{
            "name": "main", "image": ref, "command": ["/bin/sh", "-c", "trap 'exit 0' TERM; sleep 600 & wait"]}]}})

    def running(restarts: int) -> Callable[[dict], bool]:
        def check(p: dict) -> bool:
            cs = (p["status"].get("containerStatuses") or [{}])[0]
            return "running" in (cs.get("state") or {}) and cs.get("restartCount") == restarts
        return check

    cri_node.wait_pod("cri-sandbox", "phoenix", running(0), timeout=120, what="running, never restarted")
    for restarts in (1, 2):
        os.kill(pause_pid(containerd, "phoenix"), signal.SIGKILL)  # the sandbox dies: the kubelet must make a new one
        pod = cri_node.wait_pod("cri-sandbox", "phoenix", running(restarts), timeout=120, what=f"running with {restarts} restarts")
        cs = pod["status"]["containerStatuses"][0]
        # the previous run (in the dead sandbox) is the last state; the count went on across sandboxes
        assert "terminated" in cs["lastState"], cs
        assert cs["lastState"]["terminated"]["containerID"] != cs["containerID"], cs
    attempts = asyncio.run(_sandbox_attempts(containerd, "phoenix"))
    assert attempts == [2], f"the dead sandboxes were not removed, or the new one is not the next attempt: {attempts}"
    cri_node.core.delete_namespaced_pod("phoenix", "cri-sandbox", grace_period_seconds=0)
    cri_node.wait_gone("cri-sandbox", "phoenix", timeout=120)


async def _sandbox_attempts(ctrd: Containerd, pod_name: str) -> list[int]:
    async with CRIClient(ctrd.endpoint) as cri:
        return [s.metadata.attempt for s in await cri.list_pod_sandbox() if s.metadata.name == pod_name]


def test_a_container_over_its_memory_limit_is_oom_killed(cri_node: Node, registry: Registry) -> None:
    ref = registry.push("k8py/oom", "1", image([busybox_layer()]))
    cri_node.core.create_namespace({"metadata": {"name": "cri-oom"}})
    cri_node.core.create_namespaced_pod("cri-oom", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hog"},
        "spec": {"nodeName": "node-1", "restartPolicy": "Never", "containers": [{
            "name": "main", "image": ref, "command": ["/bin/sh", "-c", "dd if=/dev/zero of=/dev/null bs=96M count=1"],
            "resources": {"limits": {"memory": "32Mi"}}}]}})
    done = cri_node.wait_pod("cri-oom", "hog", lambda p: p["status"].get("phase") == "Failed", timeout=120, what="Failed")
    term = done["status"]["containerStatuses"][0]["state"]["terminated"]
    # containerd saw the cgroup's OOM kill and says so, as upstream reports it
    assert (term["reason"], term["exitCode"]) == ("OOMKilled", 137), term
    cri_node.core.delete_namespaced_pod("hog", "cri-oom", grace_period_seconds=0)
    cri_node.wait_gone("cri-oom", "hog", timeout=120)


def test_a_pod_that_must_not_restart_gets_no_new_sandbox_and_fails(cri_node: Node, containerd: Containerd,
                                                                  registry: Registry) -> None:
    ref = registry.push("k8py/never", "1", image([busybox_layer()]))
    cri_node.core.create_namespace({"metadata": {"name": "cri-never"}})
    cri_node.core.create_namespaced_pod("cri-never", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "once"},
        "spec": {"nodeName": "node-1", "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "main", "image": ref, "command": ["sleep", "600"]}]}})
    cri_node.wait_pod("cri-never", "once", lambda p: p["status"].get("phase") == "Running", timeout=120, what="Running")
    os.kill(pause_pid(containerd, "once"), signal.SIGKILL)
    # as upstream: the container still running in the dead sandbox is killed, nothing runs again
    done = cri_node.wait_pod("cri-never", "once", lambda p: p["status"].get("phase") == "Failed", timeout=120, what="Failed")
    cs = done["status"]["containerStatuses"][0]
    assert cs["restartCount"] == 0 and cs["state"]["terminated"]["exitCode"] != 0, cs
    assert asyncio.run(_sandbox_attempts(containerd, "once")) in ([0], []), "a new sandbox was made for a Never pod"
    cri_node.core.delete_namespaced_pod("once", "cri-never", grace_period_seconds=0)
    cri_node.wait_gone("cri-never", "once", timeout=120)
