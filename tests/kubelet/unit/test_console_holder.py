"""The console holder keeps a container's pty master and stdin writer for as long as the container runs.

A real holder process (``console_holder.py`` as the runtime starts it) over a real pty and a
real FIFO, with ``sleep`` standing in for the container's process; the state directory is
deeper than a unix socket path may be long, as a pytest tmp dir can be.
"""

from __future__ import annotations

import os
import select
import subprocess
import time

import pytest

from k8py.kubelet.runtime.process import console_holder


def _answer(fn, *args, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return fn(*args)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)  # the holder is still starting (a loaded machine): ask again


@pytest.fixture
def container_dir(tmp_path) -> str:
    d = tmp_path / ("x" * 120) / "containers" / ("c" * 64)
    d.mkdir(parents=True)
    return str(d)


def _start(container_dir: str, pid: int, **fds: int) -> subprocess.Popen[bytes]:
    listener = console_holder.listening_socket(container_dir)
    pidfd = os.pidfd_open(pid)
    passed = [listener.fileno(), pidfd, *(fd for fd in fds.values() if fd >= 0)]
    try:
        return subprocess.Popen(console_holder.holder_argv(listen_fd=listener.fileno(), pidfd=pidfd, **fds), pass_fds=passed,
                                start_new_session=True)
    finally:
        listener.close()
        os.close(pidfd)


def test_the_terminal_outlives_its_first_owner_and_the_holder_ends_with_the_container(container_dir: str) -> None:
    container = subprocess.Popen(["sleep", "600"])
    master, slave = os.openpty()
    holder = _start(container_dir, container.pid, master=master)
    os.close(master)  # the kubelet that made it goes away
    try:
        again = _answer(console_holder.fetch_master, container_dir)
        os.write(slave, b"still here\n")
        assert select.select([again], [], [], 10)[0] and b"still here" in os.read(again, 100)
        os.close(again)
        assert holder.poll() is None
        container.kill()
        container.wait()
        assert holder.wait(timeout=30) == 0  # nothing left to hold
    finally:
        os.close(slave)
        container.kill()
        holder.kill()
        holder.wait()


def test_closing_stdin_lets_the_reader_see_eof_once_the_holder_let_go(container_dir: str) -> None:
    container = subprocess.Popen(["sleep", "600"])
    fifo = os.path.join(container_dir, "stdin.fifo")
    os.mkfifo(fifo, 0o600)
    writer = os.open(fifo, os.O_RDWR)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    holder = _start(container_dir, container.pid, stdin=writer)
    os.close(writer)
    try:
        deadline = time.monotonic() + 30
        while True:  # it answers (so it runs), and holds no terminal
            with pytest.raises(OSError) as err:
                console_holder.fetch_master(container_dir)
            if "has no terminal" in str(err.value) or time.monotonic() > deadline:
                break
        assert "has no terminal" in str(err.value)
        with pytest.raises(BlockingIOError):  # the holder keeps a writer: no EOF, only nothing to read yet
            os.read(reader, 10)
        console_holder.close_stdin(container_dir)
        assert os.read(reader, 10) == b""  # EOF: every writer is gone
    finally:
        os.close(reader)
        container.kill()
        container.wait()
        holder.wait(timeout=30)
