"""Debian's containerd, started for a test with everything it writes kept in one temp dir.

The configuration, the local images and the cleanup are k8py's own
(:mod:`k8py.cluster.containerd`, what ``k8py up --runtime containerd``
runs); this fixture only puts them in ``workdir`` under a random tag (so
parallel tests never share a bridge, a cgroup or a socket) and gives the
CNI network a fixed test-only /24 instead of a Node's podCIDR.

The sandbox image and ``busybox:1.35`` are imported locally
(:mod:`k8py.cluster.local_images`); ``registries`` are reached over plain
HTTP (the tests' docker-registry instances). :meth:`Containerd.stop` ends
containerd, then :func:`~k8py.cluster.containerd_cleanup.cleanup` removes its
shims, container processes, mounts, bridge, cgroups and stale shim sockets.
Only root can do all this; the tests skip otherwise.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import shutil
import subprocess
from typing import Sequence

from k8py.cluster import containerd as ctrd
from k8py.cluster.containerd import CGROUP_V1_CONTROLLERS, ContainerdLayout
from k8py.cluster.containerd_cleanup import cleanup
from tests.support.tools import CONTAINERD_NEXT_MISSING  # the skip reason (listed in tests/support/skip_policy.py)

__all__ = ["Containerd", "containerd_missing", "containerd_next", "CGROUP_V1_CONTROLLERS", "CONTAINERD_NEXT_MISSING"]

#: where scripts/containerd-next unpacks it
CONTAINERD_NEXT_DIR = "/var/cache/k8py/containerd-next"


def containerd_missing() -> str | None:
    why = ctrd.containerd_missing()
    if why is None and shutil.which("docker-registry") is None:
        return "docker-registry not on PATH (Debian's docker-registry)"
    return why


def _version(binary: str) -> tuple[int, int]:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    m = re.search(r" v?(\d+)\.(\d+)\.", out)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def containerd_next() -> str | None:
    """A containerd binary with CRI ``GetContainerEvents`` (1.7+): ``$K8PY_CONTAINERD_NEXT``, the machine's own
    when it is new enough, or the one scripts/containerd-next unpacked; None when there is none."""
    candidates = [os.environ.get("K8PY_CONTAINERD_NEXT", ""), shutil.which("containerd") or "",
                  os.path.join(CONTAINERD_NEXT_DIR, "usr", "bin", "containerd")]
    return next((c for c in candidates if c and os.access(c, os.X_OK) and _version(c) >= (1, 7)), None)


class Containerd:
    """``binary``: the containerd to run (its directory goes first on its PATH, so its own shim serves it)."""

    def __init__(self, workdir: str, *, registries: Sequence[str] = (), binary: str = "containerd",
                 cni_template: bool = False) -> None:
        """``cni_template``: no CNI config until ``UpdateRuntimeConfig`` gives the pod CIDR (as ``k8py up`` runs it)."""
        self.workdir = workdir
        self.cni_template = cni_template
        self.registries = list(registries)
        self.binary = binary
        self.layout = ContainerdLayout.in_dir(workdir, "%06x" % random.randrange(1 << 24))
        self.socket = self.layout.socket
        self.bridge = self.layout.bridge
        #: the cgroup parent pods are put below (cgroupfs driver): removed on stop
        self.cgroup_parent = self.layout.cgroup_parent
        self.subnet = f"10.{random.randrange(200, 250)}.{random.randrange(0, 255)}.0/24"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return self.layout.endpoint

    def start(self, timeout: float = 60) -> "Containerd":
        ctrd.prepare(self.layout, subnet="" if self.cni_template else self.subnet, registries=self.registries)
        ctrd.prepare_network(self.layout, node="test")
        log = open(self.layout.log_file, "ab")
        env = dict(os.environ)
        if os.path.dirname(self.binary):
            env["PATH"] = os.path.dirname(os.path.abspath(self.binary)) + os.pathsep + env.get("PATH", "")
        self.proc = subprocess.Popen([self.binary, "--config", self.layout.config_file, "--log-level", "info"],
                                     stdout=log, stderr=log, start_new_session=True, env=env)
        log.close()
        proc = self.proc

        async def ready() -> None:
            await ctrd.wait_for_socket(self.socket, timeout=timeout, alive=lambda: proc.poll() is None)
            await ctrd.load_images(self.layout)

        try:
            asyncio.run(ready())
        except Exception as err:
            self.stop()
            raise RuntimeError(f"containerd did not start: {err}\n{self.log_tail()}") from err
        return self

    def log_tail(self, n: int = 4000) -> str:
        try:
            with open(self.layout.log_file, errors="replace") as f:
                return f.read()[-n:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None
        cleanup(self.layout)

    def __enter__(self) -> "Containerd":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

