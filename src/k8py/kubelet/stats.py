"""CPU and memory of the node and of each running container, read from ``/proc``.

What upstream gets from cAdvisor and cgroups, the process runtime gets from
the process table: a container is its main process (``ContainerStatus.pid``;
under bwrap the monitor process) and every descendant of it. One scan of
``/proc`` (:func:`process_table`) serves a whole scrape:

- CPU: the container's own cpuacct cgroup (``cpuacct.usage``, which keeps
  the CPU of children that already exited) when it has one, else the
  cumulative ``utime + stime`` of the tree, in core-seconds (then processes
  that already exited are not counted);
- memory working set: when the container has a memory cgroup of its own
  (the process runtime makes one where cgroup v1 is writable), upstream's
  figure — ``memory.usage_in_bytes`` minus ``total_inactive_file`` — else
  the tree's resident set (RSS), as bytes.

The node: busy time from ``/proc/stat`` (all but idle and iowait) and
``MemTotal - MemAvailable`` from ``/proc/meminfo``, as the kubelet's summary
reports them. Linux only; each read is a few hundred small files at most.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Iterable, Mapping

__all__ = ["Usage", "NodeMemory", "process_table", "tree_usage", "usage_of", "cgroup_working_set", "cgroup_cpu_seconds", "node_cpu_seconds", "node_memory"]

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass(frozen=True, slots=True)
class Usage:
    cpu_seconds: float
    memory_bytes: int
    timestamp: float


@dataclass(frozen=True, slots=True)
class NodeMemory:
    total: int
    available: int

    @property
    def working_set(self) -> int:
        return max(0, self.total - self.available)


@dataclass(frozen=True, slots=True)
class _Proc:
    ppid: int
    cpu_ticks: int
    rss_pages: int


def process_table(proc: str = "/proc") -> dict[int, _Proc]:
    """pid → (parent, CPU ticks, resident pages) for every process now."""
    table: dict[int, _Proc] = {}
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        try:
            with open(f"{proc}/{entry}/stat", "rb") as f:
                raw = f.read()
        except OSError:
            continue  # it exited while we looked
        # the command name is in parentheses and may hold spaces: split after the last ')'
        fields = raw[raw.rfind(b")") + 2 :].split()
        try:
            table[int(entry)] = _Proc(int(fields[1]), int(fields[11]) + int(fields[12]), int(fields[21]))
        except (IndexError, ValueError):
            continue
    return table


def _children(table: Mapping[int, _Proc]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for pid, p in table.items():
        out.setdefault(p.ppid, []).append(pid)
    return out


def tree_usage(root: int, table: Mapping[int, _Proc], children: Mapping[int, list[int]] | None = None, *, now: float | None = None) -> Usage | None:
    """The usage of ``root`` and its descendants, or None if ``root`` is gone."""
    if root not in table:
        return None
    children = children if children is not None else _children(table)
    ticks = pages = 0
    stack = [root]
    seen: set[int] = set()
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        p = table.get(pid)
        if p is None:
            continue
        ticks += p.cpu_ticks
        pages += p.rss_pages
        stack.extend(children.get(pid, ()))
    return Usage(ticks / _TICKS, pages * _PAGE, time.time() if now is None else now)


def _memory_cgroup(pid: int | str, proc: str, controller: str = "memory") -> str | None:
    try:
        with open(f"{proc}/{pid}/cgroup", encoding="ascii") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if controller in controllers.split(","):
                    return path
    except (OSError, ValueError):
        return None
    return None


def cgroup_working_set(pid: int, *, proc: str = "/proc", root: str = "/sys/fs/cgroup/memory") -> int | None:
    """The working set of ``pid``'s memory cgroup (cgroup v1) when it is not
    the kubelet's own — i.e. the container has one of its own; else None."""
    path = _memory_cgroup(pid, proc)
    if path is None or path == _memory_cgroup("self", proc):
        return None
    base = os.path.join(root, path.lstrip("/"))
    try:
        with open(os.path.join(base, "memory.usage_in_bytes"), encoding="ascii") as f:
            usage = int(f.read())
        inactive = 0
        with open(os.path.join(base, "memory.stat"), encoding="ascii") as f:
            for line in f:
                key, _, value = line.partition(" ")
                if key == "total_inactive_file":
                    inactive = int(value)
    except (OSError, ValueError):
        return None
    return max(0, usage - inactive)


def cgroup_cpu_seconds(pid: int, *, proc: str = "/proc", root: str = "/sys/fs/cgroup/cpuacct") -> float | None:
    """Cumulative CPU of ``pid``'s cpuacct cgroup (v1) when it is the container's own
    (it keeps the CPU of children that already exited); else None."""
    path = _memory_cgroup(pid, proc, "cpuacct")
    if path is None or path == _memory_cgroup("self", proc, "cpuacct"):
        return None
    try:
        with open(os.path.join(root, path.lstrip("/"), "cpuacct.usage"), encoding="ascii") as f:
            return int(f.read()) / 1e9
    except (OSError, ValueError):
        return None


def usage_of(roots: Iterable[int], proc: str = "/proc") -> dict[int, Usage]:
    """Usage for each root pid (one /proc scan for all); missing roots are left out."""
    table = process_table(proc)
    children = _children(table)
    now = time.time()
    out = {}
    for root in roots:
        usage = tree_usage(root, table, children, now=now)
        if usage is not None:
            memory = cgroup_working_set(root, proc=proc)
            cpu = cgroup_cpu_seconds(root, proc=proc)
            out[root] = Usage(usage.cpu_seconds if cpu is None else cpu, usage.memory_bytes if memory is None else memory, usage.timestamp)
    return out


def node_cpu_seconds(proc: str = "/proc") -> float:
    with open(f"{proc}/stat") as f:
        fields = f.readline().split()[1:]
    values = [int(v) for v in fields[:8]] + [0] * (8 - len(fields[:8]))
    user, nice, system, _idle, _iowait, irq, softirq, steal = values
    return (user + nice + system + irq + softirq + steal) / _TICKS


def node_memory(proc: str = "/proc") -> NodeMemory:
    info: dict[str, int] = {}
    with open(f"{proc}/meminfo") as f:
        for line in f:
            key, _, rest = line.partition(":")
            parts = rest.split()
            if parts:
                info[key] = int(parts[0]) * 1024
    total = info.get("MemTotal", 0)
    return NodeMemory(total, info.get("MemAvailable", info.get("MemFree", 0)))
