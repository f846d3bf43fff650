"""``Cluster``: one ``k8py up`` in a temp data directory, driven from a test.

It runs ``python -m k8py up --port 0`` (the supervisor of :mod:`k8py.cluster`)
as a child process and waits until ``cluster.json`` says ready. Stopping
sends SIGTERM and waits: the supervisor stops every component and the pods'
processes, so nothing is left behind. A cluster whose data directory already
has a running supervisor is attached to, not started (``--k8py-keep-cluster``
reuses one between sessions).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from typing import Any

from k8py.cluster.pki import ClusterPKI
from k8py.cluster.state import pid_alive, read_state, running_state

__all__ = ["Cluster", "ClusterStartError"]


class ClusterStartError(RuntimeError):
    """The cluster did not become ready; the message carries the supervisor's output."""


class Cluster:
    """See the module docstring. ``keep=True`` leaves the cluster running on exit."""

    def __init__(self, *, nodes: int = 1, simulated_nodes: int = 0, data_dir: str | None = None, keep: bool = False,
                 trace: bool = False, timeout: float = 120.0, extra_args: tuple[str, ...] = ()) -> None:
        self.nodes, self.simulated_nodes, self.keep, self.trace = nodes, simulated_nodes, keep, trace
        self.timeout = timeout
        self.extra_args = extra_args
        self._own_dir = data_dir is None
        self.data_dir = os.path.abspath(data_dir) if data_dir else ""
        self.url = ""
        self.kubeconfig = ""
        self.start_seconds = 0.0
        self.reused = False
        self._proc: subprocess.Popen[bytes] | None = None
        self._clients: dict[str, Any] = {}
        self._contexts: dict[str, Any] = {}

    # -- lifecycle ------------------------------------------------------------------

    def start(self) -> Cluster:
        started = time.perf_counter()
        if self._own_dir:
            self.data_dir = tempfile.mkdtemp(prefix="k8py-test-")
        os.makedirs(self.data_dir, exist_ok=True)
        state = running_state(self.data_dir)
        if state is None:
            state = self._launch()
        else:
            self.reused = True
        self.url, self.kubeconfig = state["api"], state["kubeconfig"]
        self.start_seconds = time.perf_counter() - started
        return self

    def _launch(self) -> dict[str, Any]:
        argv = [sys.executable, "-m", "k8py", "up", "--data-dir", self.data_dir, "--port", "0", "--nodes", str(self.nodes),
                "--simulated-nodes", str(self.simulated_nodes), "--timeout", str(self.timeout), *self.extra_args]
        if self.trace:
            argv += ["--trace", "--no-follow-flow"]
        self._output = os.path.join(self.data_dir, "up.out")
        with open(self._output, "ab") as out:
            self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                          start_new_session=self.keep)
        deadline = time.monotonic() + self.timeout + 10
        while True:
            state = read_state(self.data_dir) or {}
            if state.get("pid") == self._proc.pid and state.get("ready"):
                return state
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self._terminate()
                with open(self._output, errors="replace") as f:
                    raise ClusterStartError(f"k8py up did not get ready in {self.data_dir}:\n{f.read()[-3000:]}")
            time.sleep(0.02)

    def stop(self) -> None:
        """Stop the cluster (unless ``keep``) and remove a temp data directory."""
        for client in self._clients.values():
            close = getattr(client, "close", None)
            if callable(close) and not asyncio.iscoroutinefunction(close):
                close()
        self._clients.clear()
        if self.keep:
            return
        self._terminate()
        if self.reused:
            state = running_state(self.data_dir)
            if state:
                os.kill(state["pid"], signal.SIGTERM)
                deadline = time.monotonic() + 60
                while pid_alive(state["pid"]) and time.monotonic() < deadline:
                    time.sleep(0.05)
        if self._own_dir and self.data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def _terminate(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(60)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(10)

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> Cluster:
        return await asyncio.to_thread(self.start)

    async def __aexit__(self, *_exc: object) -> None:
        await asyncio.to_thread(self.stop)

    # -- using it -------------------------------------------------------------------

    def kubectl(self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run the real kubectl against this cluster; raises with its stderr when ``check`` and it fails."""
        result = subprocess.run(["kubectl", "--kubeconfig", self.kubeconfig, *args], input=input, capture_output=True,
                                text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}): {result.stderr}")
        return result

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """One JSON request to the API server (no client library needed)."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method, headers={"Content-Type": "application/json"})
        if "admin" not in self._contexts:
            self._contexts["admin"] = ClusterPKI(self.data_dir).client_ssl_context()  # HTTPS as system:admin
        with urllib.request.urlopen(req, timeout=30, context=self._contexts["admin"]) as response:
            raw = response.read()
        return json.loads(raw) if raw else None

    @property
    def kubernetes_client(self) -> Any:
        """The official ``kubernetes`` package's ``ApiClient`` for this cluster (ImportError if not installed)."""
        if "kubernetes" not in self._clients:
            import kubernetes

            configuration = kubernetes.client.Configuration()
            kubernetes.config.load_kube_config(config_file=self.kubeconfig, client_configuration=configuration)
            self._clients["kubernetes"] = kubernetes.client.ApiClient(configuration)
        return self._clients["kubernetes"]

    @property
    def lightkube_client(self) -> Any:
        """A ``lightkube.Client`` for this cluster (ImportError if not installed)."""
        if "lightkube" not in self._clients:
            import lightkube
            from lightkube.config.kubeconfig import KubeConfig

            self._clients["lightkube"] = lightkube.Client(config=KubeConfig.from_file(self.kubeconfig))
        return self._clients["lightkube"]

    @property
    def kr8s_api(self) -> Any:
        """A (sync) ``kr8s`` API object for this cluster (ImportError if not installed)."""
        if "kr8s" not in self._clients:
            import kr8s

            self._clients["kr8s"] = kr8s.api(kubeconfig=self.kubeconfig)
        return self._clients["kr8s"]

    def create_namespace(self, prefix: str = "test-") -> str:
        ns = self.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"generateName": prefix}})
        return str(ns["metadata"]["name"])

    def delete_namespace(self, name: str) -> None:
        try:
            self.request("DELETE", f"/api/v1/namespaces/{name}")
        except urllib.error.HTTPError as err:
            if err.code != 404:
                raise
