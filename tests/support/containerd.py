"""Debian's containerd, started for a test with everything it writes kept in one temp dir.

:class:`Containerd` writes a ``config.toml`` (runtime.md rows 3b-3e) whose root,
state, socket, runc root, ``opt`` dir, CNI conf and host-local IPAM ``dataDir``
and pod netns mounts all sit below ``workdir``; ``restrict_oom_score_adj``
is on (without it runc fails to lower the pause container's oom_score_adj in
this unprivileged-ish container). The CNI network is a bridge with a random
name and a test-only /24, no masquerade (traffic stays on the host).

The sandbox ("pause") image is built here from busybox-static (``sleep``) and
pushed to the test's local docker-registry, which containerd reaches over
plain HTTP through a per-registry mirror entry; so no image leaves the machine.

:meth:`Containerd.stop` ends containerd, then every shim that served its
socket (found by their command line, killed by pid), unmounts what is still
mounted below ``workdir`` (netns, rootfs), deletes the bridge and removes the
test's cgroup parent and the stale shim sockets it left in /run/containerd/s. Only root can do all this; the tests skip otherwise.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import time
from typing import Sequence

__all__ = ["Containerd", "containerd_missing", "CGROUP_V1_CONTROLLERS"]

CGROUP_V1_CONTROLLERS = ("cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids", "systemd")


def containerd_missing() -> str | None:
    if os.geteuid() != 0:
        return "not root"
    for tool in ("containerd", "containerd-shim-runc-v2", "runc", "docker-registry", "ip"):
        if shutil.which(tool) is None:
            return f"{tool} not on PATH (Debian's containerd, docker-registry, iproute2)"
    for plugin in ("bridge", "host-local", "loopback"):
        if not os.access(f"/usr/lib/cni/{plugin}", os.X_OK):
            return f"CNI plugin {plugin} not in /usr/lib/cni (Debian's containernetworking-plugins)"
    return None


class Containerd:
    def __init__(self, workdir: str, *, sandbox_image: str, registries: Sequence[str] = ()) -> None:
        self.workdir = workdir
        self.sandbox_image = sandbox_image
        self.registries = list(registries)
        self.socket = os.path.join(workdir, "state", "containerd.sock")
        suffix = "%04x" % random.randrange(1 << 16)
        self.bridge = f"k8cri{suffix}"
        #: the cgroup parent pods are put below (cgroupfs driver): removed on stop
        self.cgroup_parent = f"/k8py-cri-{suffix}"
        self.subnet = f"10.{random.randrange(200, 250)}.{random.randrange(0, 255)}.0/24"
        self.proc: subprocess.Popen[bytes] | None = None
        self._started_at = 0.0

    @property
    def endpoint(self) -> str:
        return f"unix://{self.socket}"

    def config(self) -> str:
        d = self.workdir
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        lines = [
            "version = 2",
            f'root = "{d}/root"',
            f'state = "{d}/state"',
            'disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",',
            '  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]',
            "[grpc]",
            f'  address = "{self.socket}"',
            "[ttrpc]",
            f'  address = "{d}/state/containerd.sock.ttrpc"',
            '[plugins."io.containerd.internal.v1.opt"]',
            f'  path = "{d}/opt"',
            f"[{cri}]",
            f'  sandbox_image = "{self.sandbox_image}"',
            "  restrict_oom_score_adj = true",
            "  netns_mounts_under_state_dir = true",
            '  stream_server_address = "127.0.0.1"',
            '  stream_server_port = "0"',
            "  enable_selinux = false",
            f"[{cri}.containerd]",
            '  snapshotter = "overlayfs"',
            '  default_runtime_name = "runc"',
            f"[{cri}.containerd.runtimes.runc]",
            '  runtime_type = "io.containerd.runc.v2"',
            f"[{cri}.containerd.runtimes.runc.options]",
            f'  Root = "{d}/state/runc"',
            "  SystemdCgroup = false",
            f"[{cri}.cni]",
            '  bin_dir = "/usr/lib/cni"',
            f'  conf_dir = "{d}/cni"',
            "  max_conf_num = 1",
        ]
        for host in self.registries:
            lines += [f'[{cri}.registry.mirrors."{host}"]', f'  endpoint = ["http://{host}"]']
        return "\n".join(lines) + "\n"

    def cni_config(self) -> str:
        import json
        return json.dumps({
            "cniVersion": "1.0.0", "name": "k8py-cri-test",
            "plugins": [
                {"type": "bridge", "bridge": self.bridge, "isGateway": True, "ipMasq": False, "hairpinMode": True,
                 "ipam": {"type": "host-local", "dataDir": f"{self.workdir}/cni-ipam",
                          "ranges": [[{"subnet": self.subnet}]], "routes": [{"dst": "0.0.0.0/0"}]}},
                {"type": "loopback"},
            ]})

    def start(self, timeout: float = 60) -> "Containerd":
        os.makedirs(os.path.join(self.workdir, "cni"), exist_ok=True)
        with open(os.path.join(self.workdir, "config.toml"), "w") as f:
            f.write(self.config())
        with open(os.path.join(self.workdir, "cni", "10-k8py.conflist"), "w") as f:
            f.write(self.cni_config())
        self._started_at = time.time()
        log = open(os.path.join(self.workdir, "containerd.log"), "ab")
        self.proc = subprocess.Popen(["containerd", "--config", os.path.join(self.workdir, "config.toml"), "--log-level", "info"],
                                     stdout=log, stderr=log, start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while not os.path.exists(self.socket):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("containerd did not start:\n" + self.log_tail())
            time.sleep(0.05)
        return self

    def log_tail(self, n: int = 4000) -> str:
        try:
            with open(os.path.join(self.workdir, "containerd.log"), errors="replace") as f:
                return f.read()[-n:]
        except OSError:
            return ""

    def _shim_pids(self) -> list[int]:
        pids = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmd = f.read().split(b"\0")
            except OSError:
                continue
            if cmd and cmd[0].endswith(b"containerd-shim-runc-v2") and self.socket.encode() in cmd:
                pids.append(int(entry))
        return pids

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None
        for pid in self._shim_pids():  # shims outlive containerd by design; they and their containers go now
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        with open("/proc/self/mountinfo") as f:
            mounts = [line.split()[4] for line in f]
        for point in reversed(mounts):
            if point.startswith(self.workdir + "/"):
                subprocess.run(["umount", "-l", point], capture_output=True)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)
        # containers outlive their killed shims: end every process left in the test's cgroups, then remove them
        roots = [os.path.join("/sys/fs/cgroup", c, self.cgroup_parent.lstrip("/")) for c in CGROUP_V1_CONTROLLERS + ("",)]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            pids = self._cgroup_pids(roots)
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)
        for root in roots:
            self._rm_cgroup(root)
        self._rm_stale_shim_sockets()

    def _rm_stale_shim_sockets(self) -> None:
        """Shims make their sockets in /run/containerd/s whatever the config says; a killed one leaves it.
        Only sockets made since this containerd started and that nobody listens on any more go."""
        import socket as socketlib
        shim_dir = "/run/containerd/s"
        try:
            names = os.listdir(shim_dir)
        except OSError:
            return
        for name in names:
            path = os.path.join(shim_dir, name)
            try:
                if os.stat(path).st_mtime < self._started_at - 1:
                    continue
                with socketlib.socket(socketlib.AF_UNIX) as sock:
                    sock.connect(path)
            except ConnectionRefusedError:
                os.unlink(path)
            except OSError:
                continue

    @staticmethod
    def _cgroup_pids(roots: list[str]) -> set[int]:
        pids: set[int] = set()
        for root in roots:
            for d, _, files in os.walk(root):
                if "cgroup.procs" in files:
                    try:
                        with open(os.path.join(d, "cgroup.procs")) as f:
                            pids.update(int(p) for p in f.read().split())
                    except OSError:
                        pass
        return pids

    @staticmethod
    def _rm_cgroup(path: str) -> None:
        if not os.path.isdir(path):
            return
        for root, dirs, _ in os.walk(path, topdown=False):
            for d in dirs:
                try:
                    os.rmdir(os.path.join(root, d))
                except OSError:
                    pass
        try:
            os.rmdir(path)
        except OSError:
            pass

    def __enter__(self) -> "Containerd":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
