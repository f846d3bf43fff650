"""Every component with only what upstream grants its identity (Node,RBAC, NodeRestriction):
the scheduler as system:kube-scheduler, the controller manager as system:kube-controller-manager
with --use-service-account-credentials (each controller its kube-system service account), the
kubelet as system:node:node-a, the proxy as system:kube-proxy and dns as system:k8py-dns. A
Deployment's pods run, a Service gets endpoints, a namespace is deleted with its contents, and
no component was refused anything."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import kubernetes
import pytest
import yaml

from tests.support.kube import official_client
from tests.support.kubelet import KubeletProcess


def _kubeconfig(path: str, url: str, token: str) -> str:
    doc = {"apiVersion": "v1", "kind": "Config", "clusters": [{"name": "c", "cluster": {"server": url}}],
           "users": [{"name": "u", "user": {"token": token}}],
           "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}], "current-context": "c"}
    with open(path, "w") as f:
        yaml.safe_dump(doc, f)
    return path


def _eventually(check, timeout: float = 90.0):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, "condition not met"
        time.sleep(0.2)


@pytest.mark.slow
def test_the_cluster_works_with_each_component_holding_only_its_upstream_permissions(secured, tmp_path) -> None:
    kc = lambda token: _kubeconfig(str(tmp_path / f"{token}.kubeconfig"), secured.url, token)  # noqa: E731
    commands = {
        "scheduler": ["scheduler", "--kubeconfig", kc("scheduler-token"), "--port", "0"],
        "controller-manager": ["controller-manager", "--kubeconfig", kc("cm-token"), "--port", "0",
                               "--use-service-account-credentials"],
        "kubelet": ["kubelet", "--kubeconfig", kc("node-a-token"), "--node-name", "node-a", "--port", "0",
                    "--root-dir", str(tmp_path / "kubelet")],
        "proxy": ["proxy", "--kubeconfig", kc("proxy-token"), "--node-name", "node-a", "--port", "0",
                  "--proxy-mode", "userspace"],
        "dns": ["dns", "--kubeconfig", kc("dns-token"), "--dns-port", "0", "--port", "0"],
    }
    logs = {name: str(tmp_path / f"{name}.log") for name in commands}
    procs = {name: subprocess.Popen([sys.executable, "-m", "k8py", *args, "--log-level", "INFO"],
                                    stdout=open(logs[name], "w"), stderr=subprocess.STDOUT)
             for name, args in commands.items()}
    api = official_client(secured.url)
    try:
        core = kubernetes.client.CoreV1Api(api)
        apps = kubernetes.client.AppsV1Api(api)
        _eventually(lambda: [n for n in core.list_node().items if n.metadata.name == "node-a"])
        apps.create_namespaced_deployment("default", {"metadata": {"name": "web"}, "spec": {
            "replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
        core.create_namespaced_service("default", {"metadata": {"name": "web"}, "spec": {
            "selector": {"app": "web"}, "ports": [{"port": 80}]}})
        _eventually(lambda: len([p for p in core.list_namespaced_pod("default", label_selector="app=web").items
                                 if p.status.phase == "Running"]) == 2)
        _eventually(lambda: (core.read_namespaced_endpoints("web", "default").subsets or [None])[0] is not None)
        core.create_namespace({"metadata": {"name": "doomed"}})
        core.create_namespaced_config_map("doomed", {"metadata": {"name": "x"}})
        core.delete_namespace("doomed")
        _eventually(lambda: "doomed" not in [n.metadata.name for n in core.list_namespace().items])
        accounts = {s.metadata.name: int(s.metadata.resource_version)
                    for s in core.list_namespaced_service_account("kube-system").items}
        assert {"replicaset-controller", "deployment-controller", "namespace-controller", "generic-garbage-collector"} <= set(accounts)
        # what a new node and its first pod wait for is made (and started) before the others
        first = {"node-controller", "service-account-controller", "root-ca-cert-publisher"}
        others = {name: rv for name, rv in accounts.items() if name not in first and name != "default"}
        assert max(accounts[name] for name in first) < min(others.values()), accounts
    finally:
        api.close()
        for proc in procs.values():
            proc.terminate()
        for proc in procs.values():
            proc.wait(30)
        # a kubelet that stops leaves its containers running (as upstream's does): they go now
        KubeletProcess("", str(tmp_path / "kubelet"), node_name="node-a").kill_containers()
    for name, path in logs.items():
        refused = [line for line in open(path) if "forbidden" in line.lower()]
        assert refused == [], (name, refused[:5])
