"""How much each pod uses, for the eviction ranking (upstream reads it from the summary API).

- memory: each running container's working set (its memory cgroup where it has one, else the
  resident set of its process tree: :mod:`k8py.kubelet.stats`), by container name;
- disk: each container's log directory, plus the pod's own directory (emptyDir volumes,
  writable layers, termination logs) counted for the pod as a whole (key ``""``);
- processes: the processes in the pod's container trees;
- inodes: the files and directories in those directories.

A runtime without host pids (simulated, or one that measures itself) gives the memory it
reports, and no processes.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

from k8py.kubelet import stats
from k8py.kubelet.eviction.ranking import PodUsage
from k8py.kubelet.runtime.protocols import ContainerState, Runtime, pod_log_directory

__all__ = ["measure"]


def _du(path: str) -> tuple[int, int]:
    """(bytes, inodes) under ``path``; symlinks are not followed."""
    size = inodes = 0
    for root, dirs, files in os.walk(path):
        inodes += len(dirs) + len(files)
        for name in files:
            try:
                size += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                continue
    return size, inodes


def _tree_size(root: int, children: Mapping[int, list[int]]) -> int:
    n, stack, seen = 0, [root], set()
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        n += 1
        stack.extend(children.get(pid, ()))
    return n


async def measure(runtime: Runtime, pods: Sequence[tuple[Mapping[str, Any], str]], *, pods_dir: str, logs_dir: str) -> dict[str, PodUsage]:
    """``pods``: (pod, sandbox id) pairs; returns uid -> usage."""
    running: dict[str, list[Any]] = {}
    for pod, sandbox_id in pods:
        if not sandbox_id:
            continue
        newest: dict[str, Any] = {}
        for c in sorted(await runtime.list_containers(sandbox_id), key=lambda c: c.attempt):
            newest[c.name] = c
        running[pod["metadata"]["uid"]] = [c for c in newest.values() if c.state is ContainerState.RUNNING]
    table = stats.process_table()
    children: dict[int, list[int]] = {}
    for pid, p in table.items():
        children.setdefault(p.ppid, []).append(pid)
    usage = stats.usage_of(c.pid for cs in running.values() for c in cs if c.pid)
    out: dict[str, PodUsage] = {}
    for pod, _ in pods:
        meta = pod["metadata"]
        uid = meta["uid"]
        containers = running.get(uid, [])
        memory = {c.name: usage[c.pid].memory_bytes for c in containers if c.pid in usage}
        processes = sum(_tree_size(c.pid, children) for c in containers if c.pid in table)
        log_dir = pod_log_directory(logs_dir, meta.get("namespace", "default"), meta["name"], uid)
        disk: dict[str, int] = {}
        inodes = 0
        for c in (pod.get("spec") or {}).get("containers") or []:
            size, n = _du(os.path.join(log_dir, c["name"]))
            disk[c["name"]] = size
            inodes += n
        size, n = _du(os.path.join(pods_dir, uid))
        disk[""] = size
        out[uid] = PodUsage(memory=memory, disk=disk, processes=processes, inodes=inodes + n)
    return out
