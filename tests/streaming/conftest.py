"""A real API server, the kubelet's real HTTP server (over the host-process
runtime double of tests/support/kubelet_server.py) and a Node pointing at it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

import kubernetes
import pytest

from tests.support.kube import Kubectl, official_client
from tests.support.kubelet_server import HostRuntime, KubeletServerThread, register_node
from tests.support.servers import ServerThread, sqlite_storage

NODE = "node-1"


@dataclass
class Cluster:
    apiserver: ServerThread
    kubelet: KubeletServerThread
    runtime: HostRuntime
    client: kubernetes.client.ApiClient
    kubectl: Kubectl

    @property
    def core(self) -> kubernetes.client.CoreV1Api:
        return kubernetes.client.CoreV1Api(self.client)

    def pod(
        self, name: str, *containers: str, namespace: str = "default", init: tuple[str, ...] = (), node: str = NODE,
        labels: dict[str, str] | None = None, **spec: Any,
    ) -> dict[str, Any]:
        """Create a pod bound to the node (the API object) and tell the runtime double about it."""
        body: dict[str, Any] = {
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "spec": {"nodeName": node, "containers": [{"name": c, "image": "busybox"} for c in containers or ("main",)], **spec},
        }
        if init:
            body["spec"]["initContainers"] = [{"name": c, "image": "busybox"} for c in init]
        self.core.create_namespaced_pod(namespace, body)
        # what the kubelet would report: kubectl port-forward and attach refuse a pod that is not Running
        status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        updated = self.core.patch_namespaced_pod_status(name, namespace, {"status": status})
        obj = self.client.sanitize_for_serialization(updated)
        self.runtime.add_pod(obj)
        return obj


@pytest.fixture
def cluster(tmp_path) -> Iterator[Cluster]:
    runtime = HostRuntime(str(tmp_path / "logs"))
    # a short metrics window keeps `kubectl top` quick (the first request waits one window)
    with ServerThread(sqlite_storage(str(tmp_path / "data")), metrics_window=0.3) as apiserver, KubeletServerThread(runtime, NODE) as kubelet:
        client = official_client(apiserver.url)
        register_node(client, NODE, kubelet.port)
        try:
            yield Cluster(apiserver, kubelet, runtime, client, Kubectl(apiserver.url, str(tmp_path / "home")))
        finally:
            client.close()
