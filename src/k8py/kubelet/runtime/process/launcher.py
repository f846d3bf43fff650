"""How a container process is started, entered and signalled.

Under bubblewrap (``bwrap`` on PATH, and not disabled) a container runs as::

    bwrap --ro-bind / / --dev /dev --proc /proc --perms 1777 --tmpfs /tmp
          --unshare-pid --unshare-ipc --unshare-uts --hostname <pod>
          --json-status-fd <fd> [volume binds] --chdir <dir> -- [setpriv ... --] argv...

(``setpriv``: the securityContext, :mod:`.security`) so it sees the host read-only, its own /tmp, its volumes at their
``mountPath`` and its own pid/ipc/uts namespaces; the network is the
host's (each pod binds its own loopback IP). bwrap can only create a mount
point inside something writable, so when a mountPath's parent does not exist
on the host the read-only view is rebuilt from a tmpfs along that path, with
every host entry beside it bound back read-only (:func:`plan_mounts`) — or,
as root with overlayfs, laid over by a read-only overlay that adds the mount
points (:mod:`.host_view`: one mount where /usr/share took a hundred).

The process tree is ``bwrap (outer, our child) → bwrap (pid 1 of the
namespace) → argv``; bwrap writes ``{"child-pid": N}`` and, at the end,
``{"exit-code": N}`` to the status file, which is how a restarted kubelet
learns the exit code of a container it is no longer the parent of.
Signals: SIGTERM goes to the command itself (pid 1's children), so a
handler in the container runs; SIGKILL goes to the namespace's pid 1,
which takes the whole namespace down.

The private /tmp would hide the interpreter and k8py's own files from the
built-in images (``nginx`` runs a script of this package) when Python or
k8py is installed under /tmp (a virtualenv or a checkout there): those
directories are bound back, read-only (:func:`tmp_installs`).

Without bwrap the argv runs plainly in its own session (process group),
signalled as a group; volumes are then only reachable under the pod's
directory (the env and mounts say where), which is documented as the
degraded mode.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
from dataclasses import dataclass
from typing import Iterable, Sequence

from k8py.kubelet.runtime.protocols import Mount

__all__ = ["Launch", "bwrap_path", "build_launch", "plan_mounts", "signal_container", "read_status_file", "nsenter_argv"]

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class Launch:
    argv: list[str]
    cwd: str
    bwrap: bool


def bwrap_path(disabled: bool = False) -> str | None:
    return None if disabled else shutil.which("bwrap")


def _missing_ancestor_chain(path: str) -> list[str]:
    """The existing directory that must become writable for ``path`` to be
    mounted: bwrap creates a missing mount point, so its deepest existing
    ancestor must be writable. For ``/usr/share/nginx/html`` when
    ``/usr/share/nginx`` is missing, ``["/usr/share"]``; for ``/scratch``,
    ``["/"]``. Empty when ``path`` exists."""
    p = os.path.normpath(path)
    if os.path.lexists(p):
        return []
    while not os.path.isdir(p):
        p = os.path.dirname(p)
    # p is the deepest existing ancestor: it becomes a tmpfs with its host entries bound back
    return [p]


def _through_host_symlinks(path: str) -> str:
    """``path`` with its existing host ancestors resolved: the view is the host's, so
    ``/var/run/secrets/...`` (``/var/run -> /run``) is mounted at ``/run/secrets/...``
    and still reached by its own name; bwrap cannot make a tmpfs on a symlink."""
    p = os.path.normpath(path)
    rest: list[str] = []
    while not os.path.lexists(p) and p != "/":
        p, tail = os.path.split(p)
        rest.insert(0, tail)
    return os.path.join(os.path.realpath(p), *rest) if rest or os.path.islink(p) else path


HIDDEN = ("/tmp", "/proc", "/dev")


def host_mounts(mounts: Sequence[Mount]) -> list[Mount]:
    """``mounts`` with their container paths through the host's symlinks (:func:`_through_host_symlinks`)."""
    return [Mount(_through_host_symlinks(m.container_path), m.host_path, m.readonly, m.volume) for m in mounts]


def rebuilt_dirs(mounts: Sequence[Mount], *, hidden: Sequence[str] = HIDDEN) -> list[str]:
    """The host directories the view must rebuild for ``mounts`` (as :func:`host_mounts`
    gives them) to have their mount points, shallowest first."""
    rebuilt: list[str] = []
    for m in mounts:
        if any(m.container_path == h or m.container_path.startswith(h + "/") for h in hidden):
            continue  # bwrap makes /dev, /proc and /tmp itself: mount points there can be created
        for d in _missing_ancestor_chain(m.container_path):
            if d not in rebuilt:
                rebuilt.append(d)
    rebuilt.sort(key=lambda d: (d.count("/") if d != "/" else 0, d))
    return rebuilt


def plan_mounts(mounts: Sequence[Mount], *, hidden: Sequence[str] = HIDDEN, host_dev: bool = False,
                overlaid: Sequence[str] = ()) -> list[str]:
    """bwrap arguments for the root view plus the volumes (see the module docstring);
    ``host_dev``: the host's /dev (a privileged container) instead of bwrap's minimal one;
    ``overlaid``: rebuilt directories that already have their mount points, under the
    read-only overlay :mod:`.host_view` lays over them before bwrap starts."""
    mounts = host_mounts(mounts)
    rebuilt = [d for d in rebuilt_dirs(mounts, hidden=hidden) if d not in overlaid]
    args: list[str] = []
    if "/" not in rebuilt:
        args += ["--ro-bind", "/", "/"]
    for d in rebuilt:
        args += ["--tmpfs", d]
        for entry in sorted(os.listdir(d)):
            full = os.path.join(d, entry)
            if full in rebuilt or full in hidden:
                continue
            if os.path.islink(full):
                args += ["--symlink", os.readlink(full), full]
            elif os.path.isdir(full) or os.path.isfile(full):
                args += ["--ro-bind", full, full]
    args += [*dev_args(host_dev), "--proc", "/proc", "--perms", "1777", "--tmpfs", "/tmp"]
    for installed in tmp_installs():
        args += ["--ro-bind", installed, installed]
    for m in sorted(mounts, key=lambda m: m.container_path.count("/")):
        args += ["--ro-bind" if m.readonly else "--bind", m.host_path, m.container_path]
    return args


def tmp_installs() -> list[str]:
    """The directories of this Python and of k8py that lie under /tmp."""
    package = os.path.abspath(__file__)
    for _ in range(4):  # k8py/kubelet/runtime/process/launcher.py -> k8py
        package = os.path.dirname(package)
    return outermost_under_tmp(os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, package))


def outermost_under_tmp(paths: Iterable[str]) -> list[str]:
    """Those of ``paths`` inside /tmp, without any inside another, sorted."""
    under = sorted({p.rstrip("/") for p in paths if p.startswith("/tmp/")})
    return [p for p in under if not any(p.startswith(q + "/") for q in under)]


def dev_args(host_dev: bool) -> list[str]:
    return ["--dev-bind", "/dev", "/dev"] if host_dev else ["--dev", "/dev"]


def build_launch(
    argv: Sequence[str],
    *,
    bwrap: str | None,
    mounts: Sequence[Mount],
    working_dir: str,
    hostname: str,
    status_fd: int,
    fallback_cwd: str,
    host_dev: bool = False,
    join_pid: int = 0,
    overlaid: Sequence[str] = (),
) -> Launch:
    """``argv`` already carries the securityContext's ``setpriv`` prefix (:mod:`.security`).

    ``join_pid``: run in the pid namespace of that (host) pid instead of a new one — an
    ephemeral container's ``targetContainerName``: ``nsenter --pid`` starts bwrap inside the
    target's namespace, and the command mounts that namespace's /proc over bwrap's before it
    runs (bwrap mounts no new /proc without a pid namespace of its own). bwrap's status file
    then holds pids of that namespace, so such a container is signalled as a process group."""
    if not bwrap:
        cwd = working_dir if working_dir and os.path.isdir(working_dir) else fallback_cwd
        return Launch(list(argv), cwd, False)
    if join_pid:
        nsenter = shutil.which("nsenter") or "nsenter"
        inner = build_launch(["sh", "-c", 'mount -t proc proc /proc && exec "$@"', "sh", *argv], bwrap=bwrap, mounts=mounts,
                             working_dir=working_dir, hostname=hostname, status_fd=status_fd, fallback_cwd=fallback_cwd,
                             host_dev=host_dev)
        args = [a for a in inner.argv if a != "--unshare-pid"]
        return Launch([nsenter, f"--target={join_pid}", "--pid", "--", *args], "/", True)
    args = [bwrap, *plan_mounts(mounts, host_dev=host_dev, overlaid=overlaid), "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    if hostname:
        args += ["--hostname", hostname[:63]]
    args += ["--json-status-fd", str(status_fd)]
    if working_dir:
        args += ["--chdir", working_dir]
    args += ["--", *argv]
    return Launch(args, "/", True)


def read_status_file(path: str) -> tuple[int, int | None]:
    """(child-pid, exit-code or None) from bwrap's JSON status file; (0, None) if absent."""
    child, code = 0, None
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return 0, None
    decoder = json.JSONDecoder()
    i = 0
    while i < len(text):
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            break
        try:
            obj, i = decoder.raw_decode(text, i)
        except ValueError:
            break
        if "child-pid" in obj:
            child = int(obj["child-pid"])
        if "exit-code" in obj:
            code = int(obj["exit-code"])
    return child, code


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as f:
            return [int(x) for x in f.read().split()]
    except (FileNotFoundError, ProcessLookupError, ValueError):
        return []


def command_pid(pid: int, ns_init: int, bwrapped: bool) -> int:
    """The host pid of the container's command (what SIGTERM and exec target)."""
    if not bwrapped:
        return pid
    kids = _children(ns_init) if ns_init else []
    return kids[0] if kids else 0


def signal_container(pid: int, ns_init: int, bwrapped: bool, sig: int) -> None:
    """Deliver ``sig`` as the module docstring says; a gone process is fine."""
    try:
        if not bwrapped:
            os.killpg(pid, sig)
            return
        if sig == signal.SIGKILL:
            target = ns_init or pid
            os.kill(target, signal.SIGKILL)
            return
        cmd = command_pid(pid, ns_init, True)
        if cmd:
            os.kill(cmd, sig)
        elif ns_init:
            os.kill(ns_init, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def nsenter_argv(target_pid: int, cwd: str, cmd: Sequence[str], user: Sequence[int] | None = None,
                 namespaces: Sequence[str] = ("--pid", "--ipc", "--uts", "--mount")) -> list[str]:
    """``user`` (uid, gid): the container runs in a user namespace as that user; exec joins it as the same user."""
    nsenter = shutil.which("nsenter") or "nsenter"
    as_user = ["--user", f"--setuid={user[0]}", f"--setgid={user[1]}"] if user else []
    return [nsenter, f"--target={target_pid}", *namespaces, *as_user, "--root", f"--wd={cwd or '/'}", "--", *cmd]
