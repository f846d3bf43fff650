"""Debian's containerd, started for a test with everything it writes kept in one temp dir.

The configuration, the local images and the cleanup are k8py's own
(:mod:`k8py.cluster.containerd`, what ``k8py up --runtime containerd``
runs); this fixture only puts them in ``workdir`` under a random tag (so
parallel tests never share a bridge, a cgroup or a socket) and gives the
CNI network a fixed test-only /24 instead of a Node's podCIDR.

The sandbox image and ``busybox:1.35`` are imported locally
(:mod:`k8py.cluster.local_images`); ``registries`` are reached over plain
HTTP (the tests' docker-registry instances). :meth:`Containerd.stop` ends
containerd, then :func:`~k8py.cluster.containerd.cleanup` removes its
shims, container processes, mounts, bridge, cgroups and stale shim sockets.
Only root can do all this; the tests skip otherwise.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import subprocess
from typing import Sequence

from k8py.cluster import containerd as ctrd
from k8py.cluster.containerd import CGROUP_V1_CONTROLLERS, ContainerdLayout

__all__ = ["Containerd", "containerd_missing", "CGROUP_V1_CONTROLLERS"]


def containerd_missing() -> str | None:
    why = ctrd.containerd_missing()
    if why is None and shutil.which("docker-registry") is None:
        return "docker-registry not on PATH (Debian's docker-registry)"
    return why


class Containerd:
    def __init__(self, workdir: str, *, registries: Sequence[str] = ()) -> None:
        self.workdir = workdir
        self.registries = list(registries)
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
        ctrd.prepare(self.layout, subnet=self.subnet, registries=self.registries)
        ctrd.prepare_network(self.layout, node="test")
        log = open(self.layout.log_file, "ab")
        self.proc = subprocess.Popen(["containerd", "--config", self.layout.config_file, "--log-level", "info"],
                                     stdout=log, stderr=log, start_new_session=True)
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
        ctrd.cleanup(self.layout)

    def __enter__(self) -> "Containerd":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

