"""One real API server and one real kubelet process per test module.

Pods are bound to the kubelet's node by ``spec.nodeName`` (no scheduler
needed); every test works in a namespace of its own.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import kubernetes
import pytest

from tests.support.kube import Kubectl, official_client
from tests.support.kubelet import KubeletProcess
from tests.support.pod_waits import PodWaits
from tests.support.servers import ServerThread, sqlite_storage

_ns = itertools.count()


@dataclass
class Node(PodWaits):
    server: ServerThread
    kubelet: KubeletProcess
    kubectl: Kubectl
    api: kubernetes.client.ApiClient

    def log_tail(self) -> str:
        return "".join(list(self.kubelet.output)[-30:])


def start_node(tmp: str, name: str = "node-1", extra: tuple[str, ...] = ()) -> tuple[ServerThread, KubeletProcess, Kubectl]:
    server = ServerThread(sqlite_storage(f"{tmp}/api")).start()
    kubectl = Kubectl(server.url, f"{tmp}/home")
    kubelet = KubeletProcess(kubectl.kubeconfig, f"{tmp}/kubelet", node_name=name, extra=extra).start()
    return server, kubelet, kubectl


@contextlib.contextmanager
def node_session(tmp: str, name: str = "node-1", extra: tuple[str, ...] = (), *, kill_containers: bool = True) -> Iterator[Node]:
    """A started :class:`Node`, stopped (and, unless told not to, its containers killed: a
    stopped kubelet leaves them running, as upstream's does) when the block ends."""
    server, kubelet, kubectl = start_node(tmp, name, extra)
    api = official_client(server.url)
    try:
        yield Node(server, kubelet, kubectl, api)
    finally:
        api.close()
        kubelet.stop()
        if kill_containers:
            kubelet.kill_containers()
        server.stop()


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> Iterator[Node]:
    with node_session(str(tmp_path_factory.mktemp("node"))) as n:
        yield n


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
