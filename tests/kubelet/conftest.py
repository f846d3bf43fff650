"""One real API server and one real kubelet process per test module.

Pods are bound to the kubelet's node by ``spec.nodeName`` (no scheduler
needed); every test works in a namespace of its own.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import kubernetes
import pytest

from tests.support.kube import Kubectl, official_client
from tests.support.kubelet import KubeletProcess
from tests.support.servers import ServerThread, sqlite_storage

_ns = itertools.count()


@dataclass
class Node:
    server: ServerThread
    kubelet: KubeletProcess
    kubectl: Kubectl
    api: kubernetes.client.ApiClient

    @property
    def core(self) -> kubernetes.client.CoreV1Api:
        return kubernetes.client.CoreV1Api(self.api)

    def pod(self, ns: str, name: str) -> dict[str, Any]:
        return self.api.sanitize_for_serialization(self.core.read_namespaced_pod(name, ns))

    def wait_pod(self, ns: str, name: str, check: Callable[[dict[str, Any]], bool], timeout: float = 60, what: str = "") -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        pod: dict[str, Any] = {}
        while time.monotonic() < deadline:
            try:
                pod = self.pod(ns, name)
            except kubernetes.client.ApiException as err:
                if err.status != 404:
                    raise
                pod = {}
            if pod and check(pod):
                return pod
            time.sleep(0.2)
        raise AssertionError(f"pod {ns}/{name} never became {what or check}: last seen {pod.get('status')}\n"
                             + "".join(list(self.kubelet.output)[-30:]))

    def wait_gone(self, ns: str, name: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self.core.read_namespaced_pod(name, ns)
            except kubernetes.client.ApiException as err:
                if err.status == 404:
                    return
                raise
            time.sleep(0.2)
        raise AssertionError(f"pod {ns}/{name} was never deleted")

    def events(self, ns: str, name: str) -> list[dict[str, Any]]:
        items = self.core.list_namespaced_event(ns, field_selector=f"involvedObject.name={name}").items
        return [self.api.sanitize_for_serialization(e) for e in items]


def start_node(tmp: str, name: str = "node-1", extra: tuple[str, ...] = ()) -> tuple[ServerThread, KubeletProcess, Kubectl]:
    server = ServerThread(sqlite_storage(f"{tmp}/api")).start()
    kubectl = Kubectl(server.url, f"{tmp}/home")
    kubelet = KubeletProcess(kubectl.kubeconfig, f"{tmp}/kubelet", node_name=name, extra=extra).start()
    return server, kubelet, kubectl


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> Iterator[Node]:
    tmp = str(tmp_path_factory.mktemp("node"))
    server, kubelet, kubectl = start_node(tmp)
    api = official_client(server.url)
    try:
        yield Node(server, kubelet, kubectl, api)
    finally:
        api.close()
        kubelet.stop()
        kubelet.kill_containers()
        server.stop()


@pytest.fixture
def ns(node: Node) -> Iterator[str]:
    name = f"t{next(_ns)}-{int(time.time() * 1000) % 100000}"
    node.core.create_namespace({"metadata": {"name": name}})
    yield name


def pod_manifest(name: str, containers: list[dict[str, Any]], node_name: str = "node-1", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeName": node_name, "containers": containers, **spec}}


def phase(p: str) -> Callable[[dict[str, Any]], bool]:
    return lambda pod: (pod.get("status") or {}).get("phase") == p


def ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in (pod.get("status") or {}).get("conditions") or [])


def waiting_reason(pod: dict[str, Any], index: int = 0) -> str:
    sts = (pod.get("status") or {}).get("containerStatuses") or []
    if len(sts) <= index:
        return ""
    return ((sts[index].get("state") or {}).get("waiting") or {}).get("reason", "")
