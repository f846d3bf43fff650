"""Driving kubectl's interactive streams from a test: a terminal, or a pipe to ``attach -i``.

- :func:`pty_session` runs kubectl on a new pseudo-terminal of a given size
  (``exec -it``, ``attach -it``, ``run -it``), as a terminal emulator would;
  :func:`read_until` reads its output until a condition holds, the process
  ends or a deadline passes (never a fixed sleep);
- :func:`attach_until_echo` attaches to a container that echoes its stdin and
  writes a line until the echo comes back: the container may not be reading
  its stdin yet when kubectl attaches, so the first lines can be lost.
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import termios
import time
from typing import Callable

from tests.support.kube import KUBECTL, Kubectl

__all__ = ["pty_session", "read_until", "attach_until_echo"]


def pty_session(args: list[str], env: dict[str, str], size: tuple[int, int] = (40, 120)) -> tuple[subprocess.Popen[bytes], int]:
    """kubectl ``args`` on a new terminal of ``size`` (rows, columns); returns it and the terminal's master fd."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[0], size[1], 0, 0))
    proc = subprocess.Popen([KUBECTL, *args], stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
    os.close(slave)
    return proc, master


def read_until(master: int, proc: subprocess.Popen[bytes], seen: bytes, done: Callable[[bytes], bool],
               timeout: float = 30) -> bytes:
    """``seen`` and what the terminal shows next, until ``done(all of it)``, the process ends or ``timeout``."""
    deadline = time.monotonic() + timeout
    while not done(seen) and time.monotonic() < deadline:
        if select.select([master], [], [], 0.5)[0]:
            try:
                seen += os.read(master, 4096)
            except OSError:
                break
        elif proc.poll() is not None:
            break
    return seen


def attach_until_echo(kubectl: Kubectl, ns: str, pod: str, *, line: str = "ping", echo: str = "got: ping\n",
                      timeout: float = 30) -> str:
    """``kubectl attach -i`` to ``pod``, writing ``line`` until ``echo`` comes back; returns the line read."""
    proc = subprocess.Popen([KUBECTL, "attach", "-i", pod, "-n", ns], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=kubectl.env, text=True)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        deadline = time.monotonic() + timeout
        got = ""
        while got != echo:
            assert time.monotonic() < deadline, got
            proc.stdin.write(line + "\n")
            proc.stdin.flush()
            if select.select([proc.stdout], [], [], 1.0)[0]:
                got = proc.stdout.readline()
        return got
    finally:
        proc.kill()
        proc.wait()
