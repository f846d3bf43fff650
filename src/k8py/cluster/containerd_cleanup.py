"""Undoing one node's containerd (:mod:`.containerd`): processes, mounts, bridge, cgroups, leases, sockets, state.

:func:`cleanup` kills the shims that served its socket (shims outlive
containerd by design) and every process left in its pods' cgroups,
unmounts what is mounted below its directories, deletes its bridge (routes
go with it) and cgroups, the host-local leases, the shim sockets its shims
left in ``/run/containerd/s`` (containerd 1.6 puts them there whatever the
config says) and its state directory. ``k8py down`` and the tests call it.

Invariant: it touches only names derived from the :class:`~.containerd.ContainerdLayout`
(the processes whose command line names its socket or config file, the
cgroups below its cgroup parent, mounts below its directories, its bridge,
shim sockets made since its containerd started) — never another's.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket as socketlib
import subprocess
import time
from typing import Sequence

from k8py.cluster.containerd import CGROUP_V1_CONTROLLERS, SHIM_SOCKETS, ContainerdLayout, ip

__all__ = ["cleanup", "pod_uids", "remove_cgroups", "shim_pids", "containerd_pids"]


def _cmdline(pid: str) -> list[bytes]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def shim_pids(layout: ContainerdLayout) -> list[int]:
    """The shims serving this containerd (their command line names its socket)."""
    sock = layout.socket.encode()
    return [int(p) for p in os.listdir("/proc") if p.isdigit()
            and (cmd := _cmdline(p)) and cmd[0].endswith(b"containerd-shim-runc-v2") and sock in cmd]


def containerd_pids(layout: ContainerdLayout) -> list[int]:
    config = layout.config_file.encode()
    return [int(p) for p in os.listdir("/proc") if p.isdigit()
            and (cmd := _cmdline(p)) and os.path.basename(cmd[0]) == b"containerd" and config in cmd]


def _cgroup_roots(layout: ContainerdLayout) -> list[str]:
    rel = layout.cgroup_parent.lstrip("/")
    # v1 controllers, the v2 hierarchy of a hybrid host (``unified``: runc makes its cgroups there too), pure v2
    return ([os.path.join("/sys/fs/cgroup", c, rel) for c in CGROUP_V1_CONTROLLERS]
            + [os.path.join("/sys/fs/cgroup", "unified", rel), os.path.join("/sys/fs/cgroup", rel)])


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


def _kill(pids: Sequence[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _rm_cgroup_tree(path: str) -> None:
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


def _rm_stale_shim_sockets(since: float) -> None:
    try:
        names = os.listdir(SHIM_SOCKETS)
    except OSError:
        return
    for name in names:
        path = os.path.join(SHIM_SOCKETS, name)
        try:
            if os.stat(path).st_mtime < since - 1:
                continue  # older than this containerd: not ours
            with socketlib.socket(socketlib.AF_UNIX) as sock:
                sock.connect(path)
        except ConnectionRefusedError:
            os.unlink(path)  # made by one of our shims, which is gone
        except OSError:
            continue


def pod_uids(layout: ContainerdLayout) -> set[str]:
    """The pods with a cgroup below this node's cgroup parent (``…/pod<uid>``): the ones its kubelet ran."""
    uids: set[str] = set()
    for root in _cgroup_roots(layout):
        for _, dirs, _ in os.walk(root):
            uids.update(d[3:] for d in dirs if d.startswith("pod") and len(d) > 3)
    return uids


def remove_cgroups(layout: ContainerdLayout) -> bool:
    """Remove the node's (empty) cgroup parent in every hierarchy; True if any went."""
    gone = False
    for root in _cgroup_roots(layout):
        if os.path.isdir(root):
            _rm_cgroup_tree(root)
            gone |= not os.path.isdir(root)
    return gone


def cleanup(layout: ContainerdLayout, *, timeout: float = 30.0) -> list[str]:
    """Remove everything this containerd made on the host (see the module docstring); returns what went.
    containerd itself must be stopped first (its pids are killed here if not)."""
    removed: list[str] = []
    _kill(containerd_pids(layout))
    shims = shim_pids(layout)
    _kill(shims)
    if shims:
        removed.append(f"{len(shims)} shims")
    roots = _cgroup_roots(layout)
    deadline = time.monotonic() + timeout
    killed: set[int] = set()
    while (left := _cgroup_pids(roots)) and time.monotonic() < deadline:
        _kill(sorted(left))  # containers outlive their killed shims
        killed |= left
        time.sleep(0.05)
    if killed:
        removed.append(f"{len(killed)} container processes")
    with open("/proc/self/mountinfo") as f:
        mounts = [line.split()[4] for line in f]
    for point in reversed(mounts):
        if point.startswith((layout.home + "/", layout.state + "/")):
            subprocess.run(["umount", "-l", point], capture_output=True)
    if ip("link", "show", "dev", layout.bridge).returncode == 0:
        ip("link", "delete", "dev", layout.bridge)
        removed.append(f"bridge {layout.bridge}")
    if remove_cgroups(layout):
        removed.append(f"cgroup {layout.cgroup_parent}")
    try:
        with open(os.path.join(layout.state, "started")) as f:
            since = float(f.read().strip() or 0)
    except (OSError, ValueError):
        since = time.time() + 10  # unknown: remove none
    _rm_stale_shim_sockets(since)
    shutil.rmtree(layout.ipam_dir, ignore_errors=True)  # the leases of pods that no longer exist
    if os.path.isdir(layout.state):
        shutil.rmtree(layout.state, ignore_errors=True)
        removed.append(f"state {layout.state}")
    return removed
