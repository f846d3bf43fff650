"""docs/08-a-cluster.md, 09-the-flow.md, 10-pod-lifecycle.md and 11-pytest-fixture.md:
their Verification sections, on a real ``k8py up`` (every component its own
process) with the real kubectl."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import urllib.request
from typing import Any, Callable, Iterator

import pytest

from k8py.cluster.state import read_state
from tests.cluster.up_helpers import k8py, wait_for
from tests.support.kube import Kubectl

pytestmark = [pytest.mark.kubectl, pytest.mark.slow]

REPLICASET = """apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: demo}
spec:
  replicas: 1
  selector: {matchLabels: {app: demo}}
  template:
    metadata: {labels: {app: demo}}
    spec: {containers: [{name: nginx, image: nginx}]}
"""


class Demo:
    def __init__(self, data: str, home: str) -> None:
        self.data, self.home = data, home
        self.up()

    def up(self) -> None:
        result = k8py("up", "--data-dir", self.data, "--port", "0", "--trace", "--detach")
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout.splitlines()[-1] == f"Status: k8py status --data-dir {self.data}    Stop: k8py down --data-dir {self.data}"
        self.kubectl = Kubectl(read_state(self.data)["api"], self.home, read_state(self.data)["kubeconfig"])

    def flow(self, *args: str) -> list[dict[str, Any]]:
        out = k8py("flow", "--data-dir", self.data, "--output", "json", *args)
        assert out.returncode == 0, out.stderr
        return [json.loads(line) for line in out.stdout.splitlines()]


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Iterator[Demo]:
    root = tmp_path_factory.mktemp("walkthroughs")
    d = Demo(str(root / "demo"), str(root / "home"))
    try:
        yield d
    finally:
        k8py("down", "--data-dir", d.data)


def in_order(records: list[dict[str, Any]], steps: list[Callable[[dict[str, Any]], bool]]) -> None:
    at = 0
    for i, step in enumerate(steps):
        found = next((r for r in records if r["seq"] > at and step(r)), None)
        assert found is not None, f"step {i} not found after seq {at}"
        at = found["seq"]


def test_08_a_cluster(demo):
    k = demo.kubectl
    assert k.run("get", "nodes", "-o", "name").stdout.split() == ["node/k8py-node-0"]
    k.run("create", "deployment", "web", "--image=nginx", "--replicas=2")
    assert k.run("rollout", "status", "deployment/web", "--timeout=60s", timeout=90).stdout.splitlines()[-1] == \
        'deployment "web" successfully rolled out'
    assert k.run("expose", "deployment", "web", "--port", "80").stdout.strip() == "service/web exposed"
    ip = k.run("get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}").stdout

    def page() -> str:
        try:
            with urllib.request.urlopen(f"http://{ip}/", timeout=5) as r:
                return r.read().decode()
        except OSError:
            return ""

    assert "<title>Welcome to nginx!</title>" in str(wait_for(page, "the Service to answer"))
    down = k8py("down", "--data-dir", demo.data)
    assert down.stdout.startswith(f"k8py down: stopped the cluster in {demo.data}")
    demo.up()
    assert demo.kubectl.run("get", "deployment", "web", "-o", "name").stdout.strip() == "deployment.apps/web"


def test_09_the_flow(demo):
    demo.kubectl.run("create", "-f", "-", input=REPLICASET)
    wait_for(lambda: demo.kubectl.run("get", "rs", "demo", "-o", "jsonpath={.status.readyReplicas}").stdout == "1", "1 ready")
    writes = demo.flow("--name", "demo*", "--kind", "write")
    in_order(writes, [
        lambda r: (r["component"], r["verb"], r["resource"]) == ("kubectl", "create", "replicasets"),
        lambda r: (r["component"], r["verb"], r["resource"]) == ("controller-manager", "create", "pods"),
        lambda r: (r["component"], r["resource"], r["subresource"]) == ("scheduler", "pods", "binding"),
        lambda r: (r["component"], r["subresource"], r["summary"].get("phase")) == ("kubelet", "status", "Running"),
        lambda r: (r["component"], r["resource"], r["subresource"], r["summary"].get("readyReplicas"))
        == ("controller-manager", "replicasets", "status", 1),
    ])
    reasons = [r["summary"]["reason"] for r in writes if r["resource"] == "events"]
    assert {"SuccessfulCreate", "Scheduled", "Pulling", "Pulled", "Created", "Started"} <= set(reasons)
    watches = demo.flow("--name", "demo*", "--kind", "watch", "--resource", "pods")
    assert any(w["component"] == "kubelet" and w["event"] == "ADDED" and w["summary"]["nodeName"] == "k8py-node-0" for w in watches)


def test_10_pod_lifecycle(demo):
    k = demo.kubectl
    k.run("create", "deployment", "life", "--image=nginx")
    wait_for(lambda: k.run("get", "pods", "-l", "app=life", "-o", "name").stdout, "the pod")
    assert "condition met" in k.run("wait", "--for=condition=Ready", "pod", "-l", "app=life", "--timeout=60s", timeout=90).stdout
    pod = json.loads(k.run("get", "pod", "-l", "app=life", "-o", "json").stdout)["items"][0]
    assert (pod["status"]["phase"], pod["spec"]["nodeName"]) == ("Running", "k8py-node-0")
    assert {c["type"]: c["status"] for c in pod["status"]["conditions"]} == {
        "PodReadyToStartContainers": "True", "Initialized": "True", "Ready": "True", "ContainersReady": "True", "PodScheduled": "True"}
    name = pod["metadata"]["name"]
    k.run("delete", "pod", name, "--wait=false")
    wait_for(lambda: any(r["verb"] == "delete" and r["component"] == "kubelet" for r in demo.flow("--name", name, "--kind", "write")),
             "the kubelet's final delete")
    steps = [(r["component"], r["verb"], r["subresource"], r["summary"].get("phase"))
             for r in demo.flow("--resource", "pods", "--name", name, "--kind", "write")]
    in_order([{"seq": i + 1, "s": s} for i, s in enumerate(steps)], [
        lambda r: r["s"][:2] == ("controller-manager", "create") and r["s"][3] == "Pending",
        lambda r: r["s"][:3] == ("scheduler", "create", "binding"),
        lambda r: r["s"] == ("kubelet", "patch", "status", "Running"),
        lambda r: r["s"][:2] == ("kubectl", "delete"),
        lambda r: r["s"] == ("kubelet", "patch", "status", "Succeeded"),
        lambda r: r["s"][:2] == ("kubelet", "delete"),
    ])


def test_11_pytest_fixture(tmp_path):
    (tmp_path / "test_fixture.py").write_text(
        "def test_the_cluster_runs_a_pod(k8py_cluster, k8py_namespace):\n"
        "    k8py_cluster.kubectl('run', 'one', '--image=nginx', '-n', k8py_namespace)\n"
        "    k8py_cluster.kubectl('wait', '--for=condition=Ready', 'pod/one', '-n', k8py_namespace, '--timeout=60s', timeout=90)\n")
    registered = any(ep.value == "k8py.testing" for ep in importlib.metadata.entry_points(group="pytest11"))
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *([] if registered else ["-p", "k8py.testing"]),
                             str(tmp_path)], capture_output=True, text=True, cwd=str(tmp_path), timeout=300)
    assert result.returncode == 0 and "1 passed" in result.stdout, result.stdout[-2000:]
