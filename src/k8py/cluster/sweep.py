"""Leave no process of a data directory behind.

Containers started by the process runtime run in their own sessions (so a
kubelet restart does not take them down, and a new kubelet adopts them), so
stopping the kubelet does not stop them. On ``k8py down`` (and Ctrl-C) every
process of this user that belongs to the data directory goes: its command
line names the directory and it is a k8py component or bwrap process (component flags,
a container's binds), or it is a component the zygote forked (named
``k8py-<component>``, writing to ``DATA_DIR/logs``), or its working directory or environment does (a
container's pod directory), or it holds a file under it open (a container's
log fifos and bwrap status file: a container without volumes is named
nowhere else), and every descendant of such a process. A
``tail -f DATA_DIR/logs/…`` in another terminal is left alone, and so is a
shell whose only link is ``KUBECONFIG``, and containerd and its shims unless
they descend from a component (containerd writes the pods' log files; one
that ``k8py up`` only uses is not its to stop). The caller and its ancestors are never touched.
"""

from __future__ import annotations

import os
import signal
import time

__all__ = ["processes_of", "sweep"]


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def _ppid(pid: int) -> int:
    stat = _read(f"/proc/{pid}/stat").decode(errors="replace")
    try:
        return int(stat.rsplit(")", 1)[1].split()[1])
    except (IndexError, ValueError):
        return 0


def _ancestors(pid: int) -> set[int]:
    out = set()
    while pid > 1:
        out.add(pid)
        pid = _ppid(pid)
    return out


#: ``zygote`` too: the components it forks keep its command line
COMPONENT_COMMANDS = {b"apiserver", b"controller-manager", b"scheduler", b"kubelet", b"proxy", b"dns", b"zygote", b"containerd"}


def _is_component(cmdline: bytes) -> bool:
    """``… k8py <component> …`` (``python -m k8py`` or the script), not
    ``k8py down``/``status``/``up`` (the caller, or the supervisor)."""
    args = cmdline.split(b"\0")
    for i, arg in enumerate(args[:-1]):
        if arg == b"k8py" or arg.endswith(b"/k8py"):
            return args[i + 1] in COMPONENT_COMMANDS
    return False


def _has_open_file_under(pid: int, root: bytes) -> bool:
    """A container holds its log fifos and bwrap's status file open, all under
    the kubelets' root directories (``DATA_DIR/kubelet``), even when nothing
    else names it. (Only there: a ``less DATA_DIR/logs/…`` is left alone.)"""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}").encode()
        except OSError:
            continue
        if target.startswith(root + b"/kubelet/"):
            return True
    return False


def _forked_component(pid: int, root: bytes) -> bool:
    """A process the zygote forked (or the zygote forked from ``k8py up``):
    named ``k8py-<component>``, its output into ``DATA_DIR/logs`` — its
    command line is ``k8py up``'s, which need not name the directory."""
    if not _read(f"/proc/{pid}/comm").startswith(b"k8py-"):
        return False
    try:
        return os.readlink(f"/proc/{pid}/fd/1").encode().startswith(root + b"/logs/")
    except OSError:
        return False


#: variables that name the data directory in a user's own processes, not a container's: a shell
#: that did ``export KUBECONFIG=DATA_DIR/kubeconfig`` and the ``k8py down`` or kubectl it runs are not the cluster's
_USER_VARIABLES = (b"KUBECONFIG=",)


def _environ_names(pid: int, root: bytes) -> bool:
    """The process's environment names ``root`` (a container's pod directory), other than in :data:`_USER_VARIABLES`."""
    return any(root in entry for entry in _read(f"/proc/{pid}/environ").split(b"\0") if not entry.startswith(_USER_VARIABLES))


def _runtime_daemon(cmdline: bytes) -> bool:
    """containerd or one of its shims: a CRI runtime's, which ``k8py up`` may only be using
    (``--container-runtime-endpoint``); its own are stopped by their component and
    :func:`k8py.cluster.containerd_cleanup.cleanup`."""
    exe = os.path.basename(cmdline.split(b"\0", 1)[0])
    return exe == b"containerd" or exe.startswith(b"containerd-shim")


def processes_of(data_dir: str) -> list[int]:
    """Pids (of this uid) that belong to ``data_dir``, descendants included."""
    root = os.path.realpath(data_dir).encode()
    uid = os.getuid()
    protected = _ancestors(os.getpid())
    pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    children: dict[int, list[int]] = {}
    matched: set[int] = set()
    for pid in pids:
        try:
            if os.stat(f"/proc/{pid}").st_uid != uid:
                continue
        except OSError:
            continue
        children.setdefault(_ppid(pid), []).append(pid)
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd").encode()
        except OSError:
            cwd = b""
        cmdline = _read(f"/proc/{pid}/cmdline")
        ours = _is_component(cmdline) or os.path.basename(cmdline.split(b"\0", 1)[0]) == b"bwrap"
        if _runtime_daemon(cmdline):
            continue  # containerd holds the pods' log files open; ours goes with its k8py containerd (a descendant)
        if ((ours and root in cmdline) or _forked_component(pid, root) or cwd == root or cwd.startswith(root + b"/")
                or _environ_names(pid, root) or _has_open_file_under(pid, root)):
            matched.add(pid)
    todo, found = list(matched), set()
    while todo:
        pid = todo.pop()
        if pid in found:
            continue
        found.add(pid)
        todo.extend(children.get(pid, ()))
    return sorted(found - protected)


def sweep(data_dir: str, *, grace: float = 5.0) -> list[int]:
    """SIGTERM every process of ``data_dir``, SIGKILL what is left after
    ``grace`` seconds; returns the pids signalled."""
    pids = processes_of(data_dir)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + grace
    left = pids
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [p for p in processes_of(data_dir) if p in pids]
    for pid in processes_of(data_dir):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return pids
