"""Run the installed etcd binary for k8py: one member or a small local cluster.

``start_etcd_cluster(data_dir, members=N)`` starts N ``etcd`` processes on
loopback, one member per subdirectory of ``data_dir`` (``m0``, ``m1``, ...),
and returns once every member answers ``/health``. It is what ``k8py etcd``
runs, and what the tests use to get a real etcd (and to kill and restart
members under a running client).

Why the ports are remembered: a member's peer URL is recorded in its data
directory when the cluster is created. Ports are picked free at run time the
first time, written to ``data_dir/cluster.json``, and reused when the same
directory is started again, so a stopped cluster comes back with its identity.

The API is synchronous (``subprocess``, ``urllib``) on purpose: it is called
from session-scoped test fixtures and from the CLI, neither of which has a
running event loop to lend; async callers wrap ``restart`` in
``asyncio.to_thread``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from typing import Any

__all__ = ["EtcdCluster", "start_etcd_cluster", "add_parser", "run", "ETCD_BINARY"]

ETCD_BINARY = os.environ.get("K8PY_ETCD_BINARY", "/usr/bin/etcd")
_HOST = "127.0.0.1"


@dataclass
class _Member:
    name: str
    data_dir: str
    client_port: int
    peer_port: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def client_url(self) -> str:
        return f"http://{_HOST}:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://{_HOST}:{self.peer_port}"


@dataclass
class EtcdCluster:
    """Handle on running etcd members. Members are addressed by index."""

    data_dir: str
    members: list[_Member]
    token: str
    progress_notify_interval: str = "1s"
    extra_args: list[str] = field(default_factory=list)

    @property
    def client_urls(self) -> list[str]:
        return [m.client_url for m in self.members]

    @property
    def etcd_servers(self) -> str:
        """The value for ``k8py apiserver --etcd-servers``."""
        return ",".join(self.client_urls)

    def _command(self, m: _Member) -> list[str]:
        initial = ",".join(f"{x.name}={x.peer_url}" for x in self.members)
        return [
            ETCD_BINARY,
            "--name", m.name,
            "--data-dir", m.data_dir,
            "--listen-client-urls", m.client_url,
            "--advertise-client-urls", m.client_url,
            "--listen-peer-urls", m.peer_url,
            "--initial-advertise-peer-urls", m.peer_url,
            "--initial-cluster", initial,
            "--initial-cluster-state", "new",
            "--initial-cluster-token", self.token,
            "--logger", "zap",
            "--log-outputs", "stderr",
            # Progress notifications feed watch bookmarks; etcd's default is 10 minutes.
            "--experimental-watch-progress-notify-interval", self.progress_notify_interval,
            *self.extra_args,
        ]  # fmt: skip

    def _launch(self, index: int) -> None:
        m = self.members[index]
        os.makedirs(m.data_dir, exist_ok=True)
        log = open(os.path.join(self.data_dir, f"{m.name}.log"), "ab")
        try:
            m.process = subprocess.Popen(
                self._command(m),
                stdout=subprocess.DEVNULL,
                stderr=log,
                start_new_session=True,  # a Ctrl-C of the parent is handled by stop()
            )
        finally:
            log.close()

    def is_running(self, index: int) -> bool:
        p = self.members[index].process
        return p is not None and p.poll() is None

    def healthy(self, index: int, *, timeout: float = 1.0) -> bool:
        if not self.is_running(index):
            return False
        try:
            with urllib.request.urlopen(
                f"{self.members[index].client_url}/health", timeout=timeout
            ) as resp:
                return bool(json.loads(resp.read()).get("health") == "true")
        except (OSError, ValueError):
            return False

    def wait_healthy(self, indices: list[int] | None = None, *, timeout: float = 30.0) -> None:
        """Block until the given members (default: all running) report healthy."""
        todo = [i for i in (indices or range(len(self.members))) if self.is_running(i)]
        deadline = time.monotonic() + timeout
        while todo:
            todo = [i for i in todo if not self.healthy(i)]
            if not todo:
                return
            for i in todo:
                if not self.is_running(i):
                    raise RuntimeError(f"etcd member {i} exited; see {self.log_path(i)}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"etcd members {todo} not healthy after {timeout}s")
            time.sleep(0.05)

    def log_path(self, index: int) -> str:
        return os.path.join(self.data_dir, f"{self.members[index].name}.log")

    def kill(self, member_index: int, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to a member and, for SIGKILL/SIGTERM, reap it."""
        p = self.members[member_index].process
        if p is None or p.poll() is not None:
            return
        p.send_signal(sig)
        if sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):
            p.wait(timeout=10)

    def restart(self, member_index: int, *, wait: bool = True, timeout: float = 30.0) -> None:
        """Start a stopped member again on its data directory and ports."""
        if self.is_running(member_index):
            self.kill(member_index)
        self._launch(member_index)
        if wait:
            self.wait_healthy([member_index], timeout=timeout)

    def member_status(self, index: int, *, timeout: float = 1.0) -> dict[str, Any]:
        req = urllib.request.Request(
            f"{self.members[index].client_url}/v3/maintenance/status", data=b"{}", method="POST"
        )
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            result: dict[str, Any] = json.loads(resp.read())
            return result

    def leader_index(self) -> int | None:
        """Index of the member that the running members agree leads, or None."""
        for i in range(len(self.members)):
            if not self.is_running(i):
                continue
            try:
                status = self.member_status(i)
            except (OSError, ValueError):
                continue
            leader = status.get("leader")
            for j in range(len(self.members)):
                if not self.is_running(j):
                    continue
                try:
                    if self.member_status(j)["header"]["member_id"] == leader:
                        return j
                except (OSError, ValueError, KeyError):
                    continue
        return None

    def stop(self) -> None:
        """Terminate every member (SIGTERM, then SIGKILL after 10 s)."""
        for m in self.members:
            if m.process is not None and m.process.poll() is None:
                m.process.terminate()
        for m in self.members:
            if m.process is None:
                continue
            try:
                m.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                m.process.kill()
                m.process.wait()

    def __enter__(self) -> EtcdCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _free_ports(n: int) -> list[int]:
    # Hold every socket until all are picked so the n ports are distinct.
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind((_HOST, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def start_etcd_cluster(
    data_dir: str,
    members: int = 1,
    *,
    progress_notify_interval: str = "1s",
    extra_args: list[str] | None = None,
    timeout: float = 30.0,
) -> EtcdCluster:
    """Start (or restart, if ``data_dir`` holds one) a local etcd cluster and
    wait until every member is healthy."""
    if not os.path.exists(ETCD_BINARY):
        raise FileNotFoundError(f"etcd binary not found at {ETCD_BINARY} (apt install etcd-server)")
    os.makedirs(data_dir, exist_ok=True)
    state_path = os.path.join(data_dir, "cluster.json")
    state: dict[str, Any] | None = None
    if os.path.exists(state_path):
        with open(state_path) as f:
            state = json.load(f)
        if len(state["members"]) != members:
            raise ValueError(
                f"{data_dir} holds a {len(state['members'])}-member cluster, not {members}"
            )
    if state is None:
        ports = _free_ports(2 * members)
        state = {
            "token": f"k8py-{uuid.uuid4().hex[:12]}",
            "members": [
                {"name": f"m{i}", "client_port": ports[2 * i], "peer_port": ports[2 * i + 1]}
                for i in range(members)
            ],
        }
        with open(state_path, "w") as f:
            json.dump(state, f, indent=2)
    cluster = EtcdCluster(
        data_dir=os.path.abspath(data_dir),
        members=[
            _Member(
                name=m["name"],
                data_dir=os.path.join(os.path.abspath(data_dir), m["name"]),
                client_port=m["client_port"],
                peer_port=m["peer_port"],
            )
            for m in state["members"]
        ],
        token=state["token"],
        progress_notify_interval=progress_notify_interval,
        extra_args=list(extra_args or []),
    )
    try:
        for i in range(members):
            cluster._launch(i)
        cluster.wait_healthy(timeout=timeout)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``k8py etcd`` on an ``argparse`` subparsers object."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "etcd", help="run the installed etcd for k8py and print the --etcd-servers value"
    )
    p.add_argument("--data-dir", required=True, help="directory for etcd data (one subdir per member)")
    p.add_argument("--members", type=int, default=1, help="cluster size (default 1)")
    p.add_argument(
        "--progress-notify-interval", default="1s", help="etcd watch progress notification interval"
    )
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Start etcd, print the ``--etcd-servers`` value, run until SIGINT/SIGTERM."""
    cluster = start_etcd_cluster(
        args.data_dir, args.members, progress_notify_interval=args.progress_notify_interval
    )
    stopping = False

    def _stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    previous = {s: signal.signal(s, _stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        print(f"--etcd-servers={cluster.etcd_servers}", flush=True)
        while not stopping:
            for i in range(len(cluster.members)):
                if not cluster.is_running(i):
                    print(f"etcd member {i} exited; see {cluster.log_path(i)}", flush=True)
                    return 1
            time.sleep(0.5)
        return 0
    finally:
        cluster.stop()
        for s, h in previous.items():
            signal.signal(s, h)
