"""A real kubelet for tests: ``python -m k8py kubelet`` as a child process.

:class:`KubeletProcess` starts it against a test API server's kubeconfig on
a free port (``--port 0``) with its own ``--root-dir`` and a random ``--pod-cidr``
inside 127.64.0.0/10 (so concurrent test kubelets never share pod IPs), waits for the line
saying it runs, and keeps its output for failure messages. Back-offs and
heartbeats are shortened through flags. ``stop`` sends SIGTERM (containers
keep running, for adoption tests); ``kill_containers`` stops whatever the
kubelet's runtime started under its root dir (only those: the processes
are found through the runtime's own records, as the runtime does).
"""

from __future__ import annotations

import collections
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from k8py.kubelet.runtime.process.records import is_same_process

__all__ = ["KubeletProcess"]


class KubeletProcess:
    def __init__(self, kubeconfig: str, root_dir: str, *, node_name: str = "node-1", extra: tuple[str, ...] = ()) -> None:
        self.kubeconfig = kubeconfig
        self.root_dir = root_dir
        self.node_name = node_name
        self.extra = extra
        self.proc: subprocess.Popen[str] | None = None
        self.port = 0
        self.output: collections.deque[str] = collections.deque(maxlen=400)

    def start(self, timeout: float = 60) -> "KubeletProcess":
        args = [sys.executable, "-m", "k8py", "kubelet", "--kubeconfig", self.kubeconfig, "--node-name", self.node_name,
                "--root-dir", self.root_dir, "--port", "0", "--backoff-base", "1", "--backoff-max", "8",
                "--node-status-update-frequency", "2", "--lease-renew-interval", "2", "--sync-frequency", "2", "--log-level", "INFO", *self.extra]
        if "--pod-cidr" not in self.extra:
            # other kubelets may run on this machine at the same time: keep our pod IPs apart
            args += ["--pod-cidr", f"127.{random.randint(65, 127)}.{random.randint(0, 255)}.0/24"]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.output.append(line)
            m = re.search(r"running\b.*/healthz and /metrics on http://[\d.]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                threading.Thread(target=self._drain, daemon=True).start()
                return self
        raise RuntimeError("kubelet did not start:\n" + "".join(self.output))

    def _drain(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def container_records(self) -> list[dict[str, Any]]:
        base = os.path.join(self.root_dir, "runtime", "containers")
        out = []
        for cid in os.listdir(base) if os.path.isdir(base) else []:
            try:
                with open(os.path.join(base, cid, "record.json"), encoding="utf-8") as f:
                    out.append(json.load(f))
            except (OSError, ValueError):
                continue
        return out

    def kill_containers(self) -> None:
        """SIGKILL every still-running container this kubelet's runtime recorded."""
        for rec in self.container_records():
            if rec.get("state") == "CONTAINER_RUNNING" and is_same_process(rec.get("pid", 0), rec.get("start_ticks", 0)):
                try:
                    os.killpg(rec["pid"], signal.SIGKILL)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 10
        for rec in self.container_records():
            for d in rec.get("cgroups") or []:
                while os.path.isdir(d) and time.monotonic() < deadline:
                    try:
                        os.rmdir(d)
                    except OSError:
                        time.sleep(0.05)
        from k8py.kubelet.cgroups.tree import CgroupTree, node_cgroup_name

        # the kubelet's own k8py-<node>-<tag> tree (QoS and pod levels), emptied leaf first
        CgroupTree(node_cgroup_name(self.node_name, self.root_dir)).close()

    def __enter__(self) -> "KubeletProcess":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
        self.kill_containers()
