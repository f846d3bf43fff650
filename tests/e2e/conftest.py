"""Fixtures for the kubectl / official-client end-to-end suite.

The shared ``apiserver``/``k8s``/``kubectl`` fixtures (tests/conftest.py) run
each test on SQLite and on etcd. test_kubectl_patch.py runs many kubectl
processes (0.1–0.3 s each) that exercise kubectl's side of the protocol, not
the store (patch engines are storage-independent); it uses ``sqlite_kubectl``
(and ``sqlite_k8s`` on the same server) so an etcd variant does not add to the
suite's time. Watches and deletion depend on the store and run on both.
"""

from __future__ import annotations

import queue
import subprocess
import threading
import time
from typing import Any, Callable, Iterator

import kubernetes
import pytest

from tests.support.kube import Kubectl, official_client
from tests.support.servers import ServerThread, sqlite_storage

NS = "default"


@pytest.fixture
def sqlite_apiserver(tmp_path) -> Iterator[ServerThread]:
    with ServerThread(sqlite_storage(str(tmp_path / "data")), bookmark_interval=1.0) as server:
        yield server


@pytest.fixture
def sqlite_k8s(sqlite_apiserver) -> Iterator[kubernetes.client.ApiClient]:
    client = official_client(sqlite_apiserver.url)
    yield client
    client.close()


@pytest.fixture
def sqlite_kubectl(sqlite_apiserver, tmp_path) -> Kubectl:
    return Kubectl(sqlite_apiserver.url, str(tmp_path / "home"))


def rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.strip().splitlines()]


def pod(name: str, labels: dict[str, str] | None = None, node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "nginx:1.27"}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": spec}


def deployment(name: str, replicas: int = 1, image: str = "nginx:1.27") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "web", "image": image, "ports": [{"containerPort": 80}]}]},
            },
        },
    }


class LineReader:
    """Lines of a running process's stdout, read with a timeout."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, name="kubectl-stdout", daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def next(self, timeout: float = 10.0) -> str:
        return self.lines.get(timeout=timeout)

    def until(self, predicate: Callable[[str], bool], timeout: float = 10.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            line = self.next(max(deadline - time.monotonic(), 0.01))
            if predicate(line):
                return line
