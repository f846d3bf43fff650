"""Resource limits with cgroup v1, where the machine allows it.

Each container gets a memory cgroup (``memory.limit_in_bytes``) and, when
it has a CPU limit, a cpu cgroup (``cpu.cfs_quota_us``/``cpu.cfs_period_us``),
created *under the kubelet's own cgroups* (``<own>/k8py-<node>/<container>``),
so a container can never escape whatever limits the kubelet itself runs
under, and nothing is written outside the kubelet's subtree. The container
joins them before its first instruction: its argv is prefixed with a
``sh -c 'echo $$ > …/cgroup.procs; exec "$@"'`` step, so every process it
forks is accounted.

An exit with 137 whose memory cgroup counts an ``oom_kill`` is reported as
``OOMKilled``, as upstream. A container's directories are removed once it
has exited. When the hierarchy is missing or not writable (cgroup v2 only,
no permission), :attr:`CgroupManager.enabled` is False and limits are only
recorded (``RuntimeInfo.enforces_limits`` says so).
"""

from __future__ import annotations

import logging
import os
from typing import Sequence

from k8py.kubelet.runtime.protocols import Resources

__all__ = ["CgroupManager"]

logger = logging.getLogger(__name__)

ROOT = "/sys/fs/cgroup"


def _own_path(controller: str) -> str | None:
    try:
        with open("/proc/self/cgroup", encoding="ascii") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if controller in controllers.split(","):
                    return path
    except OSError:
        return None
    return None


class CgroupManager:
    def __init__(self, name: str, *, root: str = ROOT, enabled: bool = True) -> None:
        self.bases: dict[str, str] = {}
        if not enabled:
            return
        for controller in ("memory", "cpu"):
            own = _own_path(controller)
            mount = os.path.join(root, controller)
            if own is None or not os.path.isdir(mount):
                continue
            base = os.path.join(mount, own.lstrip("/"), f"k8py-{name}")
            try:
                os.makedirs(base, exist_ok=True)
            except OSError as err:
                logger.info("cgroup hierarchy not writable: limits are recorded only", extra={"controller": controller, "error": str(err)})
                continue
            self.bases[controller] = base

    @property
    def enabled(self) -> bool:
        return "memory" in self.bases

    def create(self, cid: str, resources: Resources) -> list[str]:
        """The container's cgroup directories, limits written; [] when disabled."""
        dirs = []
        if "memory" in self.bases:
            d = os.path.join(self.bases["memory"], cid)
            os.makedirs(d, exist_ok=True)
            if resources.memory_limit:
                self._write(d, "memory.limit_in_bytes", str(resources.memory_limit))
            dirs.append(d)
        if "cpu" in self.bases and resources.cpu_quota:
            d = os.path.join(self.bases["cpu"], cid)
            os.makedirs(d, exist_ok=True)
            self._write(d, "cpu.cfs_period_us", str(resources.cpu_period))
            self._write(d, "cpu.cfs_quota_us", str(resources.cpu_quota))
            dirs.append(d)
        return dirs

    @staticmethod
    def _write(d: str, name: str, value: str) -> None:
        with open(os.path.join(d, name), "w", encoding="ascii") as f:
            f.write(value)

    @staticmethod
    def join_argv(dirs: Sequence[str], argv: Sequence[str]) -> list[str]:
        if not dirs:
            return list(argv)
        joins = "; ".join(f'echo $$ > "{os.path.join(d, "cgroup.procs")}"' for d in dirs)
        return ["/bin/sh", "-c", f'{joins}; exec "$@"', "k8py-cgroup-join", *argv]

    @staticmethod
    def oom_killed(dirs: Sequence[str]) -> bool:
        for d in dirs:
            try:
                with open(os.path.join(d, "memory.oom_control"), encoding="ascii") as f:
                    for line in f:
                        key, _, value = line.partition(" ")
                        if key == "oom_kill" and int(value or 0) > 0:
                            return True
            except (OSError, ValueError):
                continue
        return False

    @staticmethod
    def memory_usage(dirs: Sequence[str]) -> int:
        for d in dirs:
            try:
                with open(os.path.join(d, "memory.usage_in_bytes"), encoding="ascii") as f:
                    return int(f.read())
            except (OSError, ValueError):
                continue
        return 0

    def close(self) -> None:
        """Remove the kubelet's own directories if no container is left in them."""
        for base in self.bases.values():
            try:
                os.rmdir(base)
            except OSError:
                pass

    @staticmethod
    def remove(dirs: Sequence[str]) -> None:
        for d in dirs:
            try:
                os.rmdir(d)
            except OSError:
                pass
