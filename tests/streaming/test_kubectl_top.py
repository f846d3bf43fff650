"""``kubectl top`` through metrics.k8s.io, computed from the kubelet's /metrics/resource."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

BUSY = "import time\nwhile True:\n    sum(range(20000)); time.sleep(0.001)\n"


@pytest.fixture
def busy_process():
    """A real process that uses some CPU and memory: it plays a container's main process."""
    proc = subprocess.Popen([sys.executable, "-c", BUSY])
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def test_kubectl_top_pods_shows_cpu_and_memory(cluster, busy_process):
    cluster.pod("web", labels={"app": "web"})
    cluster.runtime.add("default", "web", "main", pid=busy_process)
    out = cluster.kubectl.run("top", "pods").stdout.splitlines()
    assert out[0].split() == ["NAME", "CPU(cores)", "MEMORY(bytes)"]
    name, cpu, memory = out[1].split()
    assert name == "web"
    assert cpu.endswith("m") and int(cpu[:-1]) > 0
    assert memory.endswith("Mi") and int(memory[:-2]) > 1
    containers = cluster.kubectl.run("top", "pod", "web", "--containers").stdout.splitlines()
    assert containers[1].split()[:2] == ["web", "main"]
    assert cluster.kubectl.run("top", "pods", "-l", "app=web").stdout.splitlines()[1].split()[0] == "web"


def test_kubectl_top_nodes_shows_usage_against_allocatable(cluster):
    out = cluster.kubectl.run("top", "nodes").stdout.splitlines()
    header = out[0].split()
    assert header[0] == "NAME" and "CPU(cores)" in header and "MEMORY(bytes)" in header
    row = out[1].split()
    assert row[0] == "node-1"
    assert row[1].endswith("m")
    assert row[3].endswith("Mi")


def test_the_metrics_api_answers_in_metrics_servers_shape(cluster, busy_process):
    cluster.pod("web")
    cluster.runtime.add("default", "web", "main", pid=busy_process)
    body = json.loads(cluster.kubectl.run("get", "--raw", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/web").stdout)
    assert body["kind"] == "PodMetrics" and body["apiVersion"] == "metrics.k8s.io/v1beta1"
    assert body["window"].endswith("s")
    [container] = body["containers"]
    assert container["name"] == "main"
    assert container["usage"]["cpu"].endswith("n") and container["usage"]["memory"].endswith("Ki")
    nodes = json.loads(cluster.kubectl.run("get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes").stdout)
    assert nodes["kind"] == "NodeMetricsList" and nodes["items"][0]["metadata"]["name"] == "node-1"
    missing = cluster.kubectl.run("get", "--raw", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/nope", check=False)
    assert "NotFound" in missing.stderr
    resources = cluster.kubectl.run("api-resources", "--api-group=metrics.k8s.io").stdout
    assert "PodMetrics" in resources and "NodeMetrics" in resources
