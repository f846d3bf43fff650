"""The real kubectl (v1.32, through the dispatcher) against a real k8py API server.

Objects are set up through the official client; kubectl's actual output is
asserted. kubectl-wire.md (shared/reference) records what each command sends.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from typing import Any

import kubernetes
import pytest
import yaml

NS = "default"


def pod(name: str, labels: dict[str, str] | None = None, node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "nginx:1.27"}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": spec}


@pytest.fixture
def core(k8s) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(k8s)


def rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.strip().splitlines()]


class LineReader:
    """Lines of a running process's stdout, read with a timeout."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def next(self, timeout: float = 10.0) -> str:
        return self.lines.get(timeout=timeout)

    def until(self, predicate: Any, timeout: float = 10.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            line = self.next(max(deadline - time.monotonic(), 0.01))
            if predicate(line):
                return line


# -- get ------------------------------------------------------------------------


def test_kubectl_get_plain_wide_and_by_label(kubectl, core):
    core.create_namespaced_pod(NS, pod("web-1", {"app": "web"}, node="node-a"))
    core.create_namespaced_pod(NS, pod("db-1", {"app": "db"}))
    plain = rows(kubectl.run("get", "pods").stdout)
    assert plain[0] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert [r[:4] for r in plain[1:]] == [["db-1", "0/1", "Pending", "0"], ["web-1", "0/1", "Pending", "0"]]
    wide = rows(kubectl.run("get", "pods", "-o", "wide").stdout)
    assert wide[0] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED", "NODE", "READINESS", "GATES"]
    assert wide[2][0] == "web-1" and wide[2][6] == "node-a"
    labelled = rows(kubectl.run("get", "pods", "-l", "app=web").stdout)
    assert [r[0] for r in labelled[1:]] == ["web-1"]
    set_based = rows(kubectl.run("get", "pods", "-l", "app in (db,cache)").stdout)
    assert [r[0] for r in set_based[1:]] == ["db-1"]
    none = kubectl.run("get", "pods", "-l", "app=nothing")
    assert none.stdout == "" and "No resources found in default namespace." in none.stderr


def test_kubectl_get_yaml_json_and_jsonpath(kubectl, core):
    created = core.create_namespaced_pod(NS, pod("p1", {"app": "web"}))
    as_yaml = yaml.safe_load(kubectl.run("get", "pod", "p1", "-o", "yaml").stdout)
    assert (as_yaml["kind"], as_yaml["apiVersion"]) == ("Pod", "v1")
    assert as_yaml["metadata"]["uid"] == created.metadata.uid
    assert as_yaml["status"]["phase"] == "Pending"
    as_json = json.loads(kubectl.run("get", "pods", "-o", "json").stdout)
    assert as_json["kind"] == "List"
    assert [i["metadata"]["name"] for i in as_json["items"]] == ["p1"]
    assert as_json["items"][0]["kind"] == "Pod"
    path = kubectl.run("get", "pods", "-o", "jsonpath={.items[*].metadata.name} {.items[0].spec.containers[0].image}").stdout
    assert path == "p1 nginx:1.27"
    rv = kubectl.run("get", "pod", "p1", "-o", "jsonpath={.metadata.resourceVersion}").stdout
    assert rv == created.metadata.resource_version


def test_kubectl_get_all_namespaces_and_field_selector(kubectl, core):
    core.create_namespace({"metadata": {"name": "team-a"}})
    core.create_namespaced_pod("team-a", pod("a-1", node="node-a"))
    core.create_namespaced_pod(NS, pod("d-1", node="node-b"))
    everywhere = rows(kubectl.run("get", "pods", "-A").stdout)
    assert everywhere[0][:2] == ["NAMESPACE", "NAME"]
    assert sorted((r[0], r[1]) for r in everywhere[1:]) == [(NS, "d-1"), ("team-a", "a-1")]
    on_node = rows(kubectl.run("get", "pods", "-A", "--field-selector", "spec.nodeName=node-a").stdout)
    assert [(r[0], r[1]) for r in on_node[1:]] == [("team-a", "a-1")]
    namespaces = [r[0] for r in rows(kubectl.run("get", "namespaces").stdout)[1:]]
    assert {"default", "kube-system", "kube-public", "kube-node-lease", "team-a"} <= set(namespaces)
    bad = kubectl.run("get", "pods", "--field-selector", "spec.bogus=x", check=False)
    assert bad.returncode != 0
    assert bad.stderr.startswith("Error from server (BadRequest): ")
    assert bad.stderr.strip().endswith("field label not supported: spec.bogus")


def test_kubectl_get_all_shows_the_all_category(kubectl, apiserver, k8s):
    apps = kubernetes.client.AppsV1Api(k8s)
    kubernetes.client.CoreV1Api(k8s).create_namespaced_pod(NS, pod("solo"))
    apps.create_namespaced_deployment(
        NS,
        {
            "metadata": {"name": "web"},
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}},
            },
        },
    )
    out = kubectl.run("get", "all").stdout
    assert "pod/solo" in out
    assert "service/kubernetes" in out
    assert "deployment.apps/web" in out
    header = next(line for line in out.splitlines() if line.startswith("NAME") and "CLUSTER-IP" in line)
    assert header.split() == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"]
    svc = next(line.split() for line in out.splitlines() if line.startswith("service/kubernetes"))
    assert svc[1:5] == ["ClusterIP", "127.192.0.1", "<none>", "443/TCP"]


# -- watch -------------------------------------------------------------------------


def test_kubectl_get_watch_receives_changes_as_they_happen(kubectl, core):
    core.create_namespaced_pod(NS, pod("first"))
    proc = kubectl.popen("get", "pods", "-w")
    try:
        reader = LineReader(proc)
        assert reader.next().split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
        assert reader.next().split()[:3] == ["first", "0/1", "Pending"]
        core.create_namespaced_pod(NS, pod("second"))
        assert reader.until(lambda line: line.startswith("second")).split()[:3] == ["second", "0/1", "Pending"]
        core.patch_namespaced_pod_status("first", NS, {"status": {"phase": "Running"}})
        assert reader.until(lambda line: line.startswith("first")).split()[:3] == ["first", "0/1", "Running"]
    finally:
        proc.kill()
        proc.wait(10)


# -- create / delete / describe -------------------------------------------------------


def test_kubectl_create_from_a_file_and_again_is_already_exists(kubectl, core, tmp_path):
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p1\n  labels: {app: demo}\n"
        "spec:\n  containers:\n  - name: main\n    image: busybox\n    args: [sleep, '3600']\n"
    )
    assert kubectl.run("create", "-f", str(manifest)).stdout.strip() == "pod/p1 created"
    stored = core.read_namespaced_pod("p1", NS)
    assert stored.metadata.labels == {"app": "demo"} and stored.spec.containers[0].args == ["sleep", "3600"]
    again = kubectl.run("create", "-f", str(manifest), check=False)
    assert again.returncode == 1
    assert again.stderr.strip() == f'Error from server (AlreadyExists): error when creating "{manifest}": pods "p1" already exists'


def test_kubectl_create_refuses_an_unknown_field_via_strict_field_validation(kubectl, core, tmp_path):
    manifest = tmp_path / "cm.yaml"
    manifest.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c1\nbogusField: 1\ndata: {a: b}\n")
    result = kubectl.run("create", "-f", str(manifest), check=False)
    assert result.returncode == 1
    assert 'unknown field "bogusField"' in result.stderr
    assert core.list_namespaced_config_map(NS, field_selector="metadata.name=c1").items == []


def test_kubectl_delete_waits_for_the_deleted_event(kubectl, core):
    core.create_namespaced_pod(NS, pod("doomed"))
    core.create_namespaced_config_map(NS, {"metadata": {"name": "cm1"}})
    started = time.monotonic()
    assert kubectl.run("delete", "pod", "doomed").stdout.strip() == 'pod "doomed" deleted'
    assert time.monotonic() - started < 10
    assert kubectl.run("delete", "configmap", "cm1").stdout.strip() == 'configmap "cm1" deleted'
    assert core.list_namespaced_pod(NS).items == []
    missing = kubectl.run("delete", "pod", "nope", check=False)
    assert missing.returncode == 1
    assert missing.stderr.strip() == 'Error from server (NotFound): pods "nope" not found'


def test_kubectl_describe_pod_shows_fields_and_events(kubectl, core):
    created = core.create_namespaced_pod(NS, pod("described", {"app": "web"}))
    core.create_namespaced_event(
        NS,
        {
            "metadata": {"name": "described.1"},
            "involvedObject": {"kind": "Pod", "name": "described", "namespace": NS, "uid": created.metadata.uid},
            "reason": "Scheduled",
            "message": "Successfully assigned default/described to node-a",
            "type": "Normal",
            "source": {"component": "default-scheduler"},
            "count": 1,
        },
    )
    out = kubectl.run("describe", "pod", "described").stdout
    fields = {line.split(":", 1)[0]: line.split(":", 1)[1].strip() for line in out.splitlines() if ":" in line and not line.startswith(" ")}
    assert fields["Name"] == "described"
    assert fields["Namespace"] == NS
    assert fields["Labels"] == "app=web"
    assert fields["Status"] == "Pending"
    assert ["Image:", "nginx:1.27"] in [line.split() for line in out.splitlines()]
    events = out[out.index("Events:") :]
    assert "Scheduled" in events and "Successfully assigned default/described to node-a" in events


# -- cluster-level commands ---------------------------------------------------------------


def test_kubectl_api_resources_and_api_versions(kubectl):
    table = rows(kubectl.run("api-resources").stdout)
    assert table[0] == ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]
    by_name: dict[str, list[str]] = {}
    for r in table[1:]:  # the core group comes first; metrics.k8s.io also has "nodes" and "pods"
        by_name.setdefault(r[0], r)
    assert by_name["pods"] == ["pods", "po", "v1", "true", "Pod"]
    assert ["pods", "metrics.k8s.io/v1beta1", "true", "PodMetrics"] in table
    assert by_name["namespaces"] == ["namespaces", "ns", "v1", "false", "Namespace"]
    assert by_name["deployments"] == ["deployments", "deploy", "apps/v1", "true", "Deployment"]
    assert by_name["leases"][1:] == ["coordination.k8s.io/v1", "true", "Lease"]
    namespaced = {r[0] for r in rows(kubectl.run("api-resources", "--namespaced=false", "--no-headers").stdout)}
    assert {"namespaces", "nodes"} <= namespaced and "pods" not in namespaced
    versions = kubectl.run("api-versions").stdout.split()
    assert {"v1", "apps/v1", "batch/v1", "coordination.k8s.io/v1", "discovery.k8s.io/v1", "events.k8s.io/v1"} <= set(versions)


def test_kubectl_version_and_cluster_info(kubectl, apiserver):
    version = kubectl.run("version").stdout
    assert "Client Version: v1.32" in version
    assert "Server Version: v1.32." in version
    assert "WARNING" not in version
    info = kubectl.run("cluster-info").stdout
    assert f"Kubernetes control plane is running at {apiserver.url}" in info
