"""The kubelet's real HTTP server over a host-process runtime double, for streaming tests.

Why a double: the streaming tests check the API server's relays and the
kubelet server (:mod:`k8py.kubelet.server`) end to end with the real kubectl;
they need containers whose log files, exit codes and stdio the test controls
exactly. :class:`HostRuntime` implements the part of the runtime protocols the
server uses, with real host processes and real CRI-format log files:

- a "container" is a record the test adds (:meth:`HostRuntime.add`), running
  (optionally with a real process, e.g. ``sleep``) or exited;
- ``exec_spec`` runs the command on the host (what the process runtime does
  without bwrap); ``port_forward_address`` is 127.0.0.1 and the port, so a
  test server on a free port plays the pod's port;
- the test writes log records with :func:`write_log`.

The e2e tests in ``tests/kubelet`` drive the real kubelet and process runtime.

:class:`KubeletServerThread` serves ``build_app`` on a free loopback port in a
thread of its own; :func:`register_node` creates the Node that points at it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import threading
import time
from typing import Any, Callable, Mapping, Sequence

import kubernetes
from aiohttp import web
from prometheus_client import CollectorRegistry

from k8py.kubelet.runtime.protocols import (
    ContainerState,
    ContainerStatus,
    ExecSpec,
    NotFoundError,
    RuntimeErrorStatus,
)
from k8py.kubelet.server import build_app
from k8py.kubelet.server.cri_logs import format_timestamp_ns
from k8py.kubelet.server_context import ServerContext

__all__ = ["HostRuntime", "KubeletServerThread", "register_node", "write_log"]


def write_log(path: str, *records: tuple[str, str], at: float | None = None, partial: bool = False) -> None:
    """Append (stream, text) records in the CRI format."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "ab") as f:
        for i, (stream, text) in enumerate(records):
            ns = int(((at if at is not None else time.time()) + i * 1e-6) * 1e9)
            tag = "P" if partial else "F"
            f.write(f"{format_timestamp_ns(ns)} {stream} {tag} {text}\n".encode())


class HostRuntime:
    """Containers as records with host processes; see the module docstring."""

    def __init__(self, log_root: str) -> None:
        self.log_root = log_root
        self.containers: dict[str, ContainerStatus] = {}
        self.fifos: dict[str, str] = {}
        self.pods: list[dict[str, Any]] = []
        self.sandboxes: dict[tuple[str, str], str] = {}

    def add_pod(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        self.pods.append(pod)
        self.sandboxes[(meta["namespace"], meta["name"])] = f"sandbox-{meta['name']}"

    def add(self, namespace: str, pod: str, name: str, *, attempt: int = 0, running: bool = True, pid: int = 0, exit_code: int = 0) -> ContainerStatus:
        cid = f"{pod}-{name}-{attempt}"
        status = ContainerStatus(
            id=cid,
            sandbox_id=f"sandbox-{pod}",
            name=name,
            attempt=attempt,
            state=ContainerState.RUNNING if running else ContainerState.EXITED,
            image="busybox",
            started_at=time.time(),
            exit_code=exit_code,
            log_path=os.path.join(self.log_root, f"{namespace}_{pod}", name, f"{attempt}.log"),
            pid=pid,
        )
        os.makedirs(os.path.dirname(status.log_path), exist_ok=True)
        open(status.log_path, "ab").close()
        self.containers[cid] = status
        return status

    def exit(self, container_id: str, code: int = 0) -> None:
        self.containers[container_id] = dataclasses.replace(
            self.containers[container_id], state=ContainerState.EXITED, exit_code=code, finished_at=time.time(), pid=0
        )

    # -- what the server calls -------------------------------------------------

    async def container_status(self, container_id: str) -> ContainerStatus:
        try:
            return self.containers[container_id]
        except KeyError:
            raise NotFoundError(container_id) from None

    async def exec_spec(self, container_id: str, cmd: Sequence[str], *, tty: bool = False) -> ExecSpec:
        status = await self.container_status(container_id)
        if status.state != ContainerState.RUNNING:
            raise RuntimeErrorStatus("ContainerNotRunning", "container is not running")
        return ExecSpec(list(cmd), dict(os.environ), "/")

    async def exec_sync(self, container_id: str, cmd: Sequence[str], timeout: float) -> Any:
        raise NotImplementedError("not used by the server")

    async def port_forward_address(self, sandbox_id: str, port: int) -> tuple[str, int]:
        return "127.0.0.1", port

    def attach_fifo(self, container_id: str) -> str | None:
        return self.fifos.get(container_id)


class _Pods:
    def __init__(self, runtime: HostRuntime) -> None:
        self.runtime = runtime

    def pods(self) -> Sequence[Mapping[str, Any]]:
        return self.runtime.pods

    def sandbox_id(self, namespace: str, name: str) -> str | None:
        return self.runtime.sandboxes.get((namespace, name))

    async def containers(self, namespace: str, name: str) -> Sequence[ContainerStatus]:
        found = [c for c in self.runtime.containers.values() if c.sandbox_id == f"sandbox-{name}"]
        return sorted(found, key=lambda c: (c.name, c.attempt))


class KubeletServerThread:
    """``ssl_context``/``middlewares``: serve HTTPS as a secure kubelet does (k8py.kubelet.server_tls).
    ``make_auth``: called in the server's loop, returns the middlewares and an async close
    (for a :class:`~k8py.kubelet.server_auth.KubeletAuth` whose API client lives on that loop)."""

    def __init__(self, runtime: HostRuntime, node_name: str = "node-1", *, ssl_context: Any = None,
                 middlewares: tuple[Any, ...] = (), make_auth: Callable[[], tuple[tuple[Any, ...], Any]] | None = None) -> None:
        self.runtime = runtime
        self._ssl_context, self._middlewares = ssl_context, middlewares
        self._make_auth, self._close_auth = make_auth, None
        self.ctx = ServerContext(node_name=node_name, runtime=runtime, pods=_Pods(runtime), registry=CollectorRegistry())  # type: ignore[arg-type]
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self._runner: web.AppRunner | None = None
        self._thread = threading.Thread(target=self.loop.run_forever, name="kubelet-server", daemon=True)

    def start(self) -> "KubeletServerThread":
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(30)
        return self

    async def _start(self) -> None:
        if self._make_auth is not None:
            self._middlewares, self._close_auth = self._make_auth()
        self._runner = web.AppRunner(build_app(self.ctx, poll_interval=0.05, middlewares=self._middlewares), shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self._ssl_context)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self.loop).result(30)
        if self._close_auth is not None:
            asyncio.run_coroutine_threadsafe(self._close_auth(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(30)
        self.loop.close()

    def __enter__(self) -> "KubeletServerThread":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def register_node(client: kubernetes.client.ApiClient, name: str, port: int) -> None:
    """A Node whose kubelet is at 127.0.0.1:port (what the kubelet registers)."""
    core = kubernetes.client.CoreV1Api(client)
    core.create_node({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}})
    core.patch_node_status(
        name,
        {
            "status": {
                "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": name}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
                "capacity": {"cpu": "2", "memory": "4Gi", "pods": "110"},
                "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok"}],
            }
        },
    )
