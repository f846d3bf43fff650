"""CgroupTree: the kubepods layout on this host's cgroups, v1 or v2.

The k8py-owned parent is ``k8py-<name>`` inside the kubelet's own cgroup
(``/proc/self/cgroup``), so nothing is ever written outside the kubelet's
subtree and a container can never escape whatever limits the kubelet runs
under. A kubelet's name is :func:`node_cgroup_name`: its node name and a tag
of its root directory, because two clusters on one machine (every ``k8py up``
calls its node ``k8py-node-0``) would otherwise share, and tear down, one tree. Below it, :mod:`.qos`'s paths: ``kubepods[/burstable|/besteffort]/
pod<uid>/<container>``.

- **v1** (and the hybrid layout of these machines: v1 controllers plus an
  empty ``unified`` mount): one directory per controller — ``memory``
  (``memory.limit_in_bytes``), ``cpu`` (``cpu.cfs_quota_us``,
  ``cpu.cfs_period_us``, ``cpu.shares``), ``cpuacct`` (usage), ``pids``
  (``pids.max``). A controller whose hierarchy is missing or not writable is
  skipped (logged); without ``memory`` the tree is disabled.
- **v2** (``/sys/fs/cgroup/cgroup.controllers`` exists): one directory;
  ``memory.max``, ``cpu.max``, ``cpu.weight`` (shares converted as upstream:
  ``1 + (shares - 2) * 9999 / 262142``), ``pids.max``; controllers enabled
  down the tree through ``cgroup.subtree_control``. The kubelet's own
  cgroup must allow that (a delegated one, or the root); if it does not, the
  tree is disabled and limits are only recorded.

A container joins its directories before its first instruction (argv prefix
``sh -c 'echo $$ > …/cgroup.procs; exec "$@"'``). A container whose memory
cgroup counts an ``oom_kill`` was OOM-killed (containerd's rule: whatever its exit code). Directories are
removed leaf first once empty; :meth:`CgroupTree.cleanup` removes the whole
``k8py-<name>`` subtree (processes still in it are killed first).
"""

from __future__ import annotations

import hashlib
import logging
import os
import signal
from typing import Sequence

from k8py.kubelet.runtime.protocols import Resources

__all__ = ["CgroupTree", "node_cgroup_name", "own_path", "weight_from_shares"]

logger = logging.getLogger(__name__)

ROOT = "/sys/fs/cgroup"
V1_CONTROLLERS = ("memory", "cpu", "cpuacct", "pids")


def own_path(controller: str, proc_cgroup: str = "/proc/self/cgroup") -> str | None:
    """This process's cgroup path for a v1 ``controller``, or for v2 when it is ``""``."""
    try:
        with open(proc_cgroup, encoding="ascii") as f:
            for line in f:
                hid, controllers, path = line.rstrip("\n").split(":", 2)
                if controller == "" and hid == "0":
                    return path
                if controller and controller in controllers.split(","):
                    return path
    except OSError:
        return None
    return None


def node_cgroup_name(node: str, root_dir: str) -> str:
    """The tree name of the kubelet of ``node`` whose root directory is ``root_dir``."""
    tag = hashlib.sha1(f"{node}\0{os.path.abspath(root_dir)}".encode()).hexdigest()[:6]
    return f"{node}-{tag}"


def weight_from_shares(shares: int) -> int:
    return 1 + ((max(2, shares) - 2) * 9999) // 262142 if shares else 100


def _write(d: str, name: str, value: str) -> None:
    with open(os.path.join(d, name), "w", encoding="ascii") as f:
        f.write(value)


def _read(path: str) -> str:
    with open(path, encoding="ascii") as f:
        return f.read()


class CgroupTree:
    def __init__(self, name: str, *, root: str = ROOT, enabled: bool = True, proc_cgroup: str = "/proc/self/cgroup") -> None:
        self.name = f"k8py-{name}"
        self.root = root
        self.version = 2 if os.path.exists(os.path.join(root, "cgroup.controllers")) else 1
        #: controller -> the k8py-owned base directory ("unified" for v2)
        self.bases: dict[str, str] = {}
        if not enabled:
            return
        if self.version == 2:
            own = own_path("", proc_cgroup)
            if own is not None:
                self._init_v2(os.path.join(root, own.lstrip("/")))
            return
        for controller in V1_CONTROLLERS:
            own = own_path(controller, proc_cgroup)
            mount = os.path.join(root, controller)
            if own is None or not os.path.isdir(mount):
                continue
            base = os.path.join(mount, own.lstrip("/"), self.name)
            try:
                os.makedirs(base, exist_ok=True)
            except OSError as err:
                logger.info("cgroup hierarchy not writable: its limits are recorded only", extra={"controller": controller, "error": str(err)})
                continue
            self.bases[controller] = base

    def _init_v2(self, own: str) -> None:
        base = os.path.join(own, self.name)
        try:
            wanted = [c for c in ("memory", "cpu", "pids") if c in _read(os.path.join(own, "cgroup.controllers")).split()]
            os.makedirs(base, exist_ok=True)
            _write(own, "cgroup.subtree_control", " ".join(f"+{c}" for c in wanted))
            _write(base, "cgroup.subtree_control", " ".join(f"+{c}" for c in wanted))
        except OSError as err:
            logger.info("cgroup v2 subtree not delegated to the kubelet: limits are recorded only", extra={"error": str(err)})
            try:
                os.rmdir(base)
            except OSError:
                pass
            return
        self.bases["unified"] = base
        self._v2_controllers = wanted

    @property
    def enabled(self) -> bool:
        return "memory" in self.bases or "unified" in self.bases

    def describe(self) -> str:
        if not self.enabled:
            return "resource limits recorded only (no writable cgroup hierarchy)"
        kinds = "v2" if self.version == 2 else "v1 " + "/".join(c for c in V1_CONTROLLERS if c in self.bases)
        return f"cpu/memory/pids limits enforced with cgroup {kinds} (QoS-class parents as upstream)"

    # -- directories ------------------------------------------------------------------------

    def _mkdirs(self, rel: str) -> list[tuple[str, str]]:
        out = []
        for controller, base in self.bases.items():
            d = os.path.join(base, rel) if rel else base
            if self.version == 2:
                self._mkdir_v2(base, rel)
            else:
                os.makedirs(d, exist_ok=True)
            out.append((controller, d))
        return out

    def _mkdir_v2(self, base: str, rel: str) -> None:
        d = base
        parts = [p for p in rel.split("/") if p]
        for i, part in enumerate(parts):
            d = os.path.join(d, part)
            if not os.path.isdir(d):
                os.mkdir(d)
            if i < len(parts) - 1:  # leaves hold processes; only inner nodes delegate controllers
                try:
                    _write(d, "cgroup.subtree_control", " ".join(f"+{c}" for c in self._v2_controllers))
                except OSError:
                    pass

    def _apply(self, controller: str, d: str, r: Resources) -> None:
        if self.version == 2:
            if r.memory_limit:
                _write(d, "memory.max", str(r.memory_limit))
            if r.cpu_quota:
                _write(d, "cpu.max", f"{r.cpu_quota} {r.cpu_period}")
            if r.cpu_shares:
                _write(d, "cpu.weight", str(weight_from_shares(r.cpu_shares)))
            if r.pids_limit:
                _write(d, "pids.max", str(r.pids_limit))
            return
        if controller == "memory" and r.memory_limit:
            _write(d, "memory.limit_in_bytes", str(r.memory_limit))
        elif controller == "cpu":
            if r.cpu_quota:
                _write(d, "cpu.cfs_period_us", str(r.cpu_period))
                _write(d, "cpu.cfs_quota_us", str(r.cpu_quota))
            if r.cpu_shares:
                _write(d, "cpu.shares", str(r.cpu_shares))
        elif controller == "pids" and r.pids_limit:
            _write(d, "pids.max", str(r.pids_limit))

    def ensure_pod(self, parent: str, resources: Resources) -> None:
        """The pod's directories (and the QoS ones above it), pod-level limits written."""
        if not self.enabled or not parent:
            return
        qos_dir = os.path.dirname(parent)
        for controller, d in self._mkdirs(qos_dir):
            if os.path.basename(qos_dir) == "besteffort" and controller in ("cpu", "unified"):
                self._apply(controller, d, Resources(cpu_shares=2))
        for controller, d in self._mkdirs(parent):
            self._apply(controller, d, resources)

    def create(self, parent: str, cid: str, resources: Resources) -> list[str]:
        """The container's directories, limits written; [] when disabled."""
        if not self.enabled:
            return []
        rel = os.path.join(parent, cid) if parent else cid
        dirs = []
        for controller, d in self._mkdirs(rel):
            self._apply(controller, d, resources)
            dirs.append(d)
        return dirs

    def pod_dirs(self, parent: str) -> list[str]:
        return [os.path.join(base, parent) for base in self.bases.values()] if parent else []

    # -- reading back -----------------------------------------------------------------------

    @staticmethod
    def oom_killed(dirs: Sequence[str]) -> bool:
        for d in dirs:
            for name in ("memory.oom_control", "memory.events"):
                try:
                    for line in _read(os.path.join(d, name)).splitlines():
                        key, _, value = line.partition(" ")
                        if key == "oom_kill" and int(value or 0) > 0:
                            return True
                except (OSError, ValueError):
                    continue
        return False

    @staticmethod
    def memory_working_set(dirs: Sequence[str]) -> int | None:
        """usage minus inactive file pages (upstream's working set), v1 or v2."""
        for d in dirs:
            for usage_file, inactive_key in (("memory.usage_in_bytes", "total_inactive_file"), ("memory.current", "inactive_file")):
                try:
                    usage = int(_read(os.path.join(d, usage_file)))
                except (OSError, ValueError):
                    continue
                inactive = 0
                try:
                    for line in _read(os.path.join(d, "memory.stat")).splitlines():
                        key, _, value = line.partition(" ")
                        if key == inactive_key:
                            inactive = int(value)
                except (OSError, ValueError):
                    pass
                return max(0, usage - inactive)
        return None

    @staticmethod
    def cpu_seconds(dirs: Sequence[str]) -> float | None:
        """Cumulative CPU of everything that ever ran in the cgroup (exited children too)."""
        for d in dirs:
            try:
                return int(_read(os.path.join(d, "cpuacct.usage"))) / 1e9
            except (OSError, ValueError):
                pass
            try:
                for line in _read(os.path.join(d, "cpu.stat")).splitlines():
                    key, _, value = line.partition(" ")
                    if key == "usage_usec":
                        return int(value) / 1e6
            except (OSError, ValueError):
                pass
        return None

    # -- removal ----------------------------------------------------------------------------

    @staticmethod
    def remove(dirs: Sequence[str]) -> None:
        for d in dirs:
            try:
                os.rmdir(d)
            except OSError:
                pass

    def remove_pod(self, parent: str) -> None:
        if not parent:
            return
        for d in self.pod_dirs(parent):
            for root, subdirs, _ in os.walk(d, topdown=False):
                for sub in subdirs:
                    self.remove([os.path.join(root, sub)])
            self.remove([d])

    def close(self) -> None:
        """Remove the empty part of the tree (QoS levels, then the k8py parent)."""
        for base in self.bases.values():
            for root, subdirs, _ in os.walk(base, topdown=False):
                for sub in subdirs:
                    self.remove([os.path.join(root, sub)])
            self.remove([base])

    def cleanup(self, timeout: float = 10.0) -> None:
        """Kill whatever is still in the tree, then remove all of it (``k8py down``, tests).

        Blocking (for command-line cleanup, not the kubelet's loop): a killed
        process leaves its cgroup only once the kernel has reaped it, so this
        retries until the tree is gone or ``timeout`` passes."""
        import time

        deadline = time.monotonic() + timeout
        while True:
            self._kill_all()
            self.close()
            if not any(os.path.isdir(b) for b in self.bases.values()) or time.monotonic() > deadline:
                return
            time.sleep(0.05)

    def _kill_all(self) -> None:
        for base in self.bases.values():
            for root, _, files in os.walk(base):
                if "cgroup.procs" in files:
                    try:
                        for pid in _read(os.path.join(root, "cgroup.procs")).split():
                            try:
                                os.kill(int(pid), signal.SIGKILL)
                            except (ProcessLookupError, ValueError):
                                pass
                    except OSError:
                        pass
