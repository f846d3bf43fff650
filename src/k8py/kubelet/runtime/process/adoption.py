"""A restarted kubelet takes back the containers it started (``ProcessRuntime.start``).

A record on disk (:mod:`.records`) says RUNNING; the container is adopted
only if its pid is still the same process (its start time matches: a pid
reused by another process is never signalled). Adopted, its stdout/stderr
FIFOs are followed again into its log, and a pidfd on the event loop says
when it ends, since the new kubelet is not its parent and cannot wait for it.
A ``tty: true`` container's pty master is taken back from its console holder
(:mod:`.console_holder`): its output goes on into its log, and attach reaches
its terminal again.
Its exit code then comes from bubblewrap's status file when there is one;
otherwise, and for a container that vanished while the kubelet was away, it
is 137 with reason ``ContainerStatusUnknown``, as upstream reports a
container whose end nobody saw.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass
from typing import Any, Callable

from k8py.kubelet.runtime.process import console_holder, launcher
from k8py.kubelet.runtime.process.log_pump import ContainerLog
from k8py.kubelet.runtime.process.records import is_same_process
from k8py.kubelet.runtime.process.terminal import Terminal

__all__ = ["Adopted", "adopt", "exit_from_status"]

logger = logging.getLogger(__name__)

UNKNOWN_EXIT = (137, "ContainerStatusUnknown")


def exit_from_status(rec: dict[str, Any], cdir: str, *, default: tuple[int, str] = UNKNOWN_EXIT) -> tuple[int, str]:
    """(exit code, reason) of an adopted container that ended: bubblewrap's, else ``default``."""
    if rec.get("bwrap"):
        _, code = launcher.read_status_file(os.path.join(cdir, "bwrap-status.json"))
        if code is not None:
            return code, ""
    return default


@dataclass
class Adopted:
    log: ContainerLog
    #: a ``tty: true`` container's terminal, back from its console holder (None if out of reach)
    terminal: Terminal | None = None


def _terminal(rec: dict[str, Any], cdir: str, log: ContainerLog) -> Terminal | None:
    try:
        master = console_holder.fetch_master(cdir)
    except OSError as err:
        logger.warning("the terminal of an adopted container is out of reach: attach streams its log only",
                       extra={"container": rec["id"], "error": str(err)})
        return None
    terminal = Terminal(master)
    log.follow_fd("stdout", os.dup(master), terminal.tap)
    return terminal


def adopt(rec: dict[str, Any], cdir: str, *, log_max_size: int, log_max_files: int,
          on_exit: Callable[[int, str], None]) -> Adopted | None:
    """Follow the running container of ``rec`` again; ``on_exit(code, reason)`` once it ends
    (at once if it is already gone). Returns its log (and terminal), None when it was gone."""
    if not is_same_process(rec["pid"], rec["start_ticks"]):
        logger.info("container vanished while the kubelet was away", extra={"container": rec["id"]})
        on_exit(*exit_from_status(rec, cdir))
        return None
    log = ContainerLog(rec["log_path"], max_size=log_max_size, max_files=log_max_files)
    terminal = _terminal(rec, cdir, log) if rec.get("tty") else None
    for stream in () if rec.get("tty") else ("stdout", "stderr"):
        try:
            log.follow(stream, os.path.join(cdir, f"{stream}.fifo"))
        except OSError:
            pass
    fd = os.pidfd_open(rec["pid"])
    loop = asyncio.get_running_loop()

    def gone() -> None:
        loop.remove_reader(fd)
        os.close(fd)
        on_exit(*exit_from_status(rec, cdir))

    loop.add_reader(fd, gone)
    logger.info("adopted running container", extra={"container": rec["id"], "pid": rec["pid"]})
    return Adopted(log, terminal)
