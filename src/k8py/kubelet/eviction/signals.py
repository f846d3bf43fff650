"""What the node has left, per eviction signal: ``available`` and ``capacity``.

Read from the host at each observation, as the summary API gives them upstream:

- ``memory.available``: ``MemAvailable`` of ``/proc/meminfo`` (upstream computes capacity
  minus the root cgroup's working set; MemAvailable is the kernel's own estimate of the
  same, and what this kubelet can read without owning the root cgroup), of ``MemTotal``;
- ``nodefs.*``: the filesystem of the kubelet's root dir (``statvfs``: blocks available to
  unprivileged users, and free inodes);
- ``imagefs.*``: the filesystem of the image store (the same one unless it is mounted apart);
- ``pid.available``: ``kernel.pid_max`` minus the processes running now.

:func:`observe` is the real source; the manager takes any callable of the same shape, so
unit tests feed it numbers (the e2e tests use the real one, with thresholds set relative to
what the host has).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["Observation", "observe"]


@dataclass(frozen=True)
class Observation:
    available: int
    capacity: int


def _meminfo() -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                key, _, rest = line.partition(":")
                parts = rest.split()
                if parts:
                    out[key] = int(parts[0]) * 1024
    except OSError:
        pass
    return out


def _fs(path: str, prefix: str) -> dict[str, Observation]:
    os.makedirs(path, exist_ok=True)
    st = os.statvfs(path)
    return {f"{prefix}.available": Observation(st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize),
            f"{prefix}.inodesFree": Observation(st.f_favail, st.f_files)}


def _pids() -> Observation:
    try:
        with open("/proc/sys/kernel/pid_max", encoding="ascii") as f:
            pid_max = int(f.read())
    except (OSError, ValueError):
        pid_max = 32768
    running = sum(1 for e in os.listdir("/proc") if e.isdigit())
    return Observation(max(0, pid_max - running), pid_max)


def observe(root_dir: str, images_dir: str) -> dict[str, Observation]:
    mem = _meminfo()
    out = {"memory.available": Observation(mem.get("MemAvailable", mem.get("MemFree", 0)), mem.get("MemTotal", 0))}
    out.update(_fs(root_dir, "nodefs"))
    out.update(_fs(images_dir, "imagefs"))
    out["pid.available"] = _pids()
    return out
