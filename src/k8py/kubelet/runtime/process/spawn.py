"""Starting a created container's process.

:func:`check_command` refuses, with runc's words, a command that is not there (the kubelet
shows ``RunContainerError``). :func:`spawn` opens the container's stdio — stdout and stderr
FIFOs the log pump follows, a stdin FIFO (``stdin: true``) or, for ``tty: true``, a pty whose
master the runtime keeps for attach — builds the launch (bwrap over the host view or a pulled
image's root, the securityContext's ``setpriv`` or bwrap capability flags, the cgroups, the
pod's network namespace) and starts it in its own session (the pty, if any, its controlling
terminal). A ``tty`` or ``stdinOnce`` container gets a console holder (:mod:`.console_holder`)
that keeps the pty master or the stdin writer across kubelet restarts. :func:`await_command` returns once
bwrap has started the command, so hooks and exec can enter it.

Invariant: every descriptor the kubelet opened for the child is closed here, whatever
happens; only the pty master (``tty``) outlives the call, owned by the caller (and a copy by
the holder, a process of its own).
"""

from __future__ import annotations

import asyncio
import logging
import os
import pty
import shutil
import time
from dataclasses import dataclass, replace
from typing import Any

from k8py.kubelet.network.pod_network import CNIPodNetwork
from k8py.kubelet.runtime.process import console_holder, host_view, launcher, oci_container, security
from k8py.kubelet.runtime.process.cgroups import CgroupManager
from k8py.kubelet.runtime.process.log_pump import ContainerLog
from k8py.kubelet.runtime.process.records import process_start_ticks
from k8py.kubelet.runtime.process.terminal import Terminal
from k8py.kubelet.runtime.protocols import ContainerState, Mount, Resources, RuntimeErrorStatus

__all__ = ["check_command", "spawn", "await_command", "Spawned"]

logger = logging.getLogger(__name__)


def check_command(rec: dict[str, Any]) -> None:
    exe = rec["argv"][0]
    mounts = [Mount(*m) for m in rec["mounts"]]
    if rec.get("rootfs"):
        oci_container.check_command(rec["rootfs"], exe, rec["env"].get("PATH", launcher.DEFAULT_PATH), mounts)
        return
    if "/" in exe:
        host = exe
        for m in mounts:
            if exe.startswith(m.container_path.rstrip("/") + "/"):
                host = m.host_path + exe[len(m.container_path.rstrip("/")):]
        if os.path.exists(host):
            return
        why = "no such file or directory"
    elif shutil.which(exe, path=rec["env"].get("PATH", launcher.DEFAULT_PATH)):
        return
    else:
        why = "executable file not found in $PATH"
    raise RuntimeErrorStatus("RunContainerError", f'failed to create containerd task: failed to create shim task: OCI runtime create failed: '
                             f'runc create failed: unable to start container process: exec: "{exe}": {why}: unknown')


@dataclass
class Spawned:
    proc: asyncio.subprocess.Process
    log: ContainerLog
    #: the pty's master side (``tty: true``)
    terminal: Terminal | None = None


def _fifo(path: str) -> int:
    if not os.path.exists(path):
        os.mkfifo(path, 0o600)
    return os.open(path, os.O_RDWR)


def _launch(rec: dict[str, Any], *, bwrap: str | None, cdir: str, status_fd: int, overlay: str, join_pid: int) -> launcher.Launch:
    sec = security.Security.from_record(rec.get("security"))
    mounts = [Mount(*m) for m in rec["mounts"]]
    host_dev = bool(sec and sec.privileged)
    if rec.get("rootfs") and bwrap:
        user = rec.get("user")
        return oci_container.build_oci_launch(rec["argv"], bwrap=bwrap, rootfs=rec["rootfs"], container_dir=cdir, mounts=mounts,
                                              cwd=rec["cwd"], hostname=rec["hostname"], status_fd=status_fd,
                                              user=(user[0], user[1]) if user else None,
                                              overlay="" if sec and sec.readonly_rootfs else overlay,
                                              cap_args=security.bwrap_cap_args(sec) if sec else (), host_dev=host_dev)
    # a terminal inside bwrap's pid namespace: the command leads its own session there with the pty
    # as its controlling terminal (made outside, a shell fails to restore the foreground group on exit)
    ctty = [shutil.which("setsid") or "setsid", "--ctty"] if rec.get("tty") and bwrap and not join_pid else []
    # mount points the host lacks: one read-only overlay each where overlayfs allows (see host_view)
    view = host_view.plan(mounts, view_dir=os.path.join(cdir, "view"), overlay=overlay) if bwrap and not join_pid else host_view.HostView()
    launch = launcher.build_launch([*ctty, *rec.get("setpriv", []), *rec["argv"]], bwrap=bwrap, mounts=mounts, working_dir=rec["cwd"],
                                   hostname=rec["hostname"], status_fd=status_fd, fallback_cwd=cdir, host_dev=host_dev, join_pid=join_pid,
                                   overlaid=view.overlaid)
    return replace(launch, argv=view.wrap(launch.argv))


async def spawn(rec: dict[str, Any], *, cdir: str, bwrap: str | None, cgroups: CgroupManager, cgroup_parent: str, netns: str,
                overlay: str, log_max_size: int, log_max_files: int, join_pid: int = 0) -> Spawned:
    """Start ``rec``'s process (see the module docstring); raises OSError, with nothing left open.
    ``join_pid``: the host pid whose pid namespace it joins (an ephemeral container's target)."""
    fds: list[int] = []
    terminal: Terminal | None = None
    log = ContainerLog(rec["log_path"], max_size=log_max_size, max_files=log_max_files)
    try:
        held = {"master": -1, "stdin": -1}  # what the console holder keeps (see console_holder)
        if rec.get("tty"):
            # a terminal: stdout and stderr are one stream, read from the master into the log as stdout
            master, slave = pty.openpty()
            fds.append(slave)
            terminal = Terminal(master)
            log.follow_fd("stdout", os.dup(master), terminal.tap)
            held["master"] = os.dup(master)
            fds.append(held["master"])
            stdin: int = slave
            stdout = stderr = slave
        else:
            for stream in ("stdout", "stderr"):
                fifo = os.path.join(cdir, f"{stream}.fifo")
                fds.append(_fifo(fifo))
                log.follow(stream, fifo)
            stdout, stderr = fds[0], fds[1]
            stdin = asyncio.subprocess.DEVNULL
            if rec["stdin"] and rec.get("stdin_once"):
                # read-only for the container: it reads EOF once every writer is gone (the holder's
                # copy, closed when the first attach ends; the attach's own). Opening it for reading
                # does not block: the holder's read-write copy already counts as a writer.
                path = os.path.join(cdir, "stdin.fifo")
                held["stdin"] = _fifo(path)
                fds.append(held["stdin"])
                stdin = os.open(path, os.O_RDONLY)
                fds.append(stdin)
            elif rec["stdin"]:
                stdin = _fifo(os.path.join(cdir, "stdin.fifo"))
                fds.append(stdin)
        status_fd = os.open(os.path.join(cdir, "bwrap-status.json"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        fds.append(status_fd)
        launch = _launch(rec, bwrap=bwrap, cdir=cdir, status_fd=status_fd, overlay=overlay, join_pid=join_pid)
        quota, period, memory, shares = (list(rec.get("resources") or (0, 100_000, 0)) + [0])[:4]
        rec["cgroups"] = cgroups.create(cgroup_parent, rec["id"], Resources(cpu_quota=quota, cpu_period=period, memory_limit=memory,
                                                                           cpu_shares=shares))
        argv = CgroupManager.join_argv(rec["cgroups"], CNIPodNetwork.wrap(netns, launch.argv))
        proc = await asyncio.create_subprocess_exec(*argv, stdin=stdin, stdout=stdout, stderr=stderr, cwd=launch.cwd, env=rec["env"],
                                                    start_new_session=True, pass_fds=(status_fd,),
                                                    preexec_fn=_controlling_tty if rec.get("tty") and (not launch.bwrap or join_pid) else None)
        if held["master"] >= 0 or held["stdin"] >= 0:
            try:
                rec["console"] = await _start_holder(cdir, proc.pid, **held)
            except OSError as err:  # the container runs on; only a kubelet restart would cost it its console
                logger.warning("no console holder for the container", extra={"container": rec["id"], "error": str(err)})
    except BaseException:
        log.close()
        if terminal is not None:
            terminal.close()
        raise
    finally:
        for fd in fds:
            os.close(fd)
    return Spawned(proc, log, terminal)


async def _start_holder(cdir: str, pid: int, *, master: int, stdin: int) -> list[int]:
    """Start the container's console holder; returns its [pid, start ticks] for the record."""
    listener = console_holder.listening_socket(cdir)
    pidfd = os.pidfd_open(pid)
    try:
        passed = [fd for fd in (listener.fileno(), pidfd, master, stdin) if fd >= 0]
        holder = await asyncio.create_subprocess_exec(
            *console_holder.holder_argv(listen_fd=listener.fileno(), pidfd=pidfd, master=master, stdin=stdin),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
            pass_fds=passed, start_new_session=True, cwd="/")
    finally:
        listener.close()
        os.close(pidfd)
    return [holder.pid, process_start_ticks(holder.pid)]


def _controlling_tty() -> None:  # in the child, after setsid: its stdin (the pty) becomes its terminal
    import fcntl
    import termios
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


async def await_command(rec: dict[str, Any], ns_init: Any, limit: float = 2.0) -> bool:
    """Wait until bwrap has started the command; ``ns_init()`` reads the namespace's init pid."""
    deadline = time.monotonic() + limit
    pause = 0.001
    while time.monotonic() < deadline and rec["state"] == ContainerState.RUNNING.value:
        init = ns_init()
        if init and launcher.command_pid(rec["pid"], init, True):
            return True
        await asyncio.sleep(pause)
        pause = min(pause * 2, 0.05)  # bwrap takes a few ms; many starting at once must not spin the loop
    return False
