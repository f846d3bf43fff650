"""A container's console holder: the descriptors that must outlive a kubelet restart.

Two things of a container belong to its runtime rather than to the kubelet process, as
conmon and containerd-shim keep them: a ``tty: true`` container's pty master, and the write
end of a ``stdinOnce`` container's stdin. If the kubelet held them alone, its exit would
close them: the pty hangs up (the kernel sends SIGHUP to the container's session, and a
restarted kubelet has no master to attach to), and a ``stdinOnce`` container reads EOF
before anyone attached. So the runtime starts one holder per such container, a tiny process
of its own session that:

- holds a copy of those descriptors, and a pidfd of the container's process;
- serves ``console.sock`` in the container's directory (mode 0600: only the kubelet's user
  reaches it). A client sends one byte: ``F`` and gets the pty master back through
  ``SCM_RIGHTS`` (that is how a restarted kubelet attaches again); ``C`` and the holder
  closes its copy of the stdin writer (the first attach of a ``stdinOnce`` container ended:
  the container reads EOF once the kubelet has closed its own copies too);
- exits when the container's process does (its pidfd becomes readable), so it never
  outlives what it holds; the runtime also kills it when the container is removed.

The holder runs as ``python -I -S console_holder.py`` (this file, stdlib only: no k8py
import, so it starts fast and is immune to the environment; about 11 MB resident, and only
``tty``/``stdinOnce`` containers have one). The kubelet binds
the listening socket itself and hands it over, so there is no window in which the holder
is not yet listening. Unix socket paths are limited to 108 bytes, and a state directory can
be deeper than that: every path here goes through ``/proc/self/fd/<dirfd>/console.sock``.

While the kubelet is away nobody reads the pty: output waits in the terminal's buffer (and
a container that fills it blocks until a kubelet is back), as with the stdout FIFOs of
other containers (:mod:`.log_pump`).
"""

from __future__ import annotations

import os
import select
import socket
import sys
from contextlib import contextmanager
from typing import Iterator

__all__ = ["SOCKET", "holder_argv", "listening_socket", "fetch_master", "close_stdin", "serve"]

SOCKET = "console.sock"
_TIMEOUT = 5.0


@contextmanager
def _dir_path(container_dir: str) -> Iterator[str]:
    """A short path to ``container_dir/console.sock`` (see the module docstring)."""
    fd = os.open(container_dir, os.O_PATH | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{SOCKET}"
    finally:
        os.close(fd)


def listening_socket(container_dir: str) -> socket.socket:
    """The holder's socket, bound and listening (the caller passes it on and closes its copy)."""
    with _dir_path(container_dir) as path:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            sock.bind(path)
        finally:
            os.umask(old)
    sock.listen(8)
    return sock


def holder_argv(*, listen_fd: int, pidfd: int, master: int = -1, stdin: int = -1) -> list[str]:
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), str(listen_fd), str(pidfd), str(master), str(stdin)]


def _ask(container_dir: str, command: bytes) -> tuple[bytes, list[int]]:
    with _dir_path(container_dir) as path, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(_TIMEOUT)
        sock.connect(path)
        sock.sendall(command)
        msg, fds, _, _ = socket.recv_fds(sock, 16, 4)
        return msg, list(fds)


def fetch_master(container_dir: str) -> int:
    """The pty master the holder keeps (a new descriptor, the caller's); raises OSError."""
    msg, fds = _ask(container_dir, b"F")
    if msg != b"M" or len(fds) != 1:
        for fd in fds:
            os.close(fd)
        raise OSError(f"the console holder has no terminal (answered {msg!r})")
    return fds[0]


def close_stdin(container_dir: str) -> None:
    """Tell the holder to close its copy of the stdin writer; raises OSError."""
    msg, fds = _ask(container_dir, b"C")
    for fd in fds:
        os.close(fd)
    if msg != b"k":
        raise OSError(f"the console holder did not close stdin (answered {msg!r})")


def _answer(conn: socket.socket, held: dict[str, int]) -> None:
    conn.settimeout(_TIMEOUT)
    command = conn.recv(1)
    if command == b"F" and held["master"] >= 0:
        socket.send_fds(conn, [b"M"], [held["master"]])
    elif command == b"C":
        if held["stdin"] >= 0:
            os.close(held["stdin"])
            held["stdin"] = -1
        conn.sendall(b"k")
    else:
        conn.sendall(b"?")


def serve(listen_fd: int, pidfd: int, master: int, stdin: int) -> None:
    """The holder's loop (see the module docstring): answer until the container ends."""
    listener = socket.socket(fileno=listen_fd)
    held = {"master": master, "stdin": stdin}
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    poller.register(listener.fileno(), select.POLLIN)
    while True:
        for fd, _ in poller.poll():
            if fd == pidfd:
                return  # the container's process is gone: nothing left to hold
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                try:
                    _answer(conn, held)
                except OSError:
                    pass  # a client that went away mid-question; the next one is served


if __name__ == "__main__":
    serve(*(int(a) for a in sys.argv[1:5]))
