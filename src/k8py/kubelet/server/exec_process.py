"""Running an exec'd command with its stdio as streams (pipes, or a pty for ``tty``).

The runtime says *how* to enter the container (:class:`ExecSpec`: a complete
argv, env and cwd — ``nsenter`` into the container's namespaces under bwrap,
the command itself otherwise); this module spawns it and exposes its stdio:

- ``output()`` yields ``(channel, bytes)`` — 1 stdout, 2 stderr (a tty merges
  both onto 1, as a terminal does) — until the process's outputs close;
- ``write_stdin`` / ``close_stdin`` feed it; ``resize`` sets the pty's size;
- ``wait()`` returns the exit code (128+N for a signal N, as a shell shows it);
- ``kill()`` ends its whole process group (the command runs in its own session).

Output is carried by a bounded queue (64 chunks): a client that stops reading
makes the command block on its output, as a full pipe would.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import pty
import shutil
import signal
import struct
import termios
from typing import AsyncIterator, Sequence

from k8py.kubelet.runtime.protocols import ExecSpec

__all__ = ["ExecProcess"]

log = logging.getLogger(__name__)

_EOF = (-1, b"")


def _set_controlling_tty() -> None:  # runs in the child, after setsid
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _terminal_argv(argv: Sequence[str]) -> list[str]:
    """With a pty, the command must lead its own session *inside* the
    container's pid namespace: a shell entered through ``nsenter --pid``
    under nsenter's session sees a foreground process group it cannot name
    and fails on exit ("Cannot set tty process group"). So the command after
    ``--`` is run through ``setsid --wait --ctty``, which takes the terminal
    over from within (as root, as the kubelet runs)."""
    argv = list(argv)
    setsid = shutil.which("setsid")
    if setsid and os.path.basename(argv[0]) == "nsenter" and "--" in argv:
        i = argv.index("--")
        return [*argv[: i + 1], setsid, "--wait", "--ctty", *argv[i + 1 :]]
    return argv


class ExecProcess:
    def __init__(self, proc: asyncio.subprocess.Process, *, master_fd: int | None, outputs: int) -> None:
        self._proc = proc
        self._master = master_fd
        self._queue: asyncio.Queue[tuple[int, bytes]] = asyncio.Queue(maxsize=64)
        self._open_outputs = outputs
        self._tasks: list[asyncio.Task[None]] = []

    @classmethod
    async def spawn(cls, spec: ExecSpec, *, stdin: bool, stdout: bool, stderr: bool, tty: bool) -> "ExecProcess":
        env = dict(spec.env)
        cwd = spec.cwd if spec.cwd and os.path.isdir(spec.cwd) else None
        if tty:
            master, slave = pty.openpty()
            env.setdefault("TERM", "xterm")
            try:
                proc = await asyncio.create_subprocess_exec(
                    *_terminal_argv(spec.argv),
                    stdin=slave,
                    stdout=slave,
                    stderr=slave,
                    env=env,
                    cwd=cwd,
                    start_new_session=True,
                    preexec_fn=_set_controlling_tty,
                )
            except BaseException:
                os.close(master)
                raise
            finally:
                os.close(slave)
            os.set_blocking(master, False)
            self = cls(proc, master_fd=master, outputs=1)
            self._watch_master()
            return self
        proc = await asyncio.create_subprocess_exec(
            *spec.argv,
            stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE if stdout else asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE if stderr else asyncio.subprocess.DEVNULL,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        self = cls(proc, master_fd=None, outputs=int(stdout) + int(stderr))
        for channel, reader in ((1, proc.stdout), (2, proc.stderr)):
            if reader is not None:
                self._tasks.append(asyncio.create_task(self._pump(channel, reader), name=f"exec-pump-{proc.pid}-{channel}"))
        if not self._open_outputs:
            self._queue.put_nowait(_EOF)
        return self

    # -- output ---------------------------------------------------------------

    async def _pump(self, channel: int, reader: asyncio.StreamReader) -> None:
        try:
            while chunk := await reader.read(32768):
                await self._queue.put((channel, chunk))
        finally:
            self._output_closed()

    def _output_closed(self) -> None:
        self._open_outputs -= 1
        if self._open_outputs <= 0:
            try:
                self._queue.put_nowait(_EOF)
            except asyncio.QueueFull:
                asyncio.get_running_loop().create_task(self._queue.put(_EOF), name="exec-eof")

    def _watch_master(self) -> None:
        loop = asyncio.get_running_loop()
        master = self._master
        assert master is not None
        paused = False

        def readable() -> None:
            nonlocal paused
            try:
                data = os.read(master, 32768)
            except BlockingIOError:
                return
            except OSError:  # EIO: the last slave fd closed (the command ended)
                data = b""
            if not data:
                loop.remove_reader(master)
                self._output_closed()
                return
            try:
                self._queue.put_nowait((1, data))
            except asyncio.QueueFull:
                # stop reading until the client catches up
                loop.remove_reader(master)
                paused = True
                loop.create_task(resume(data), name="exec-pty-backpressure")

        async def resume(data: bytes) -> None:
            nonlocal paused
            await self._queue.put((1, data))
            paused = False
            loop.add_reader(master, readable)

        loop.add_reader(master, readable)

    async def output(self) -> AsyncIterator[tuple[int, bytes]]:
        while True:
            item = await self._queue.get()
            if item is _EOF or item[0] < 0:
                return
            yield item

    # -- input ----------------------------------------------------------------

    async def write_stdin(self, data: bytes) -> None:
        if self._master is not None:
            view = memoryview(data)
            while view:
                try:
                    n = os.write(self._master, view)
                except BlockingIOError:
                    await asyncio.sleep(0.01)  # the pty's input buffer is full: the command is not reading
                    continue
                except OSError:
                    return
                view = view[n:]
            return
        stdin = self._proc.stdin
        if stdin is None or stdin.is_closing():
            return
        stdin.write(data)
        try:
            await stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def close_stdin(self) -> None:
        if self._master is not None:
            # a terminal has no half-close: send EOF (^D) as a user would
            try:
                os.write(self._master, b"\x04")
            except OSError:
                pass
            return
        if self._proc.stdin is not None and not self._proc.stdin.is_closing():
            self._proc.stdin.close()

    def resize(self, width: int, height: int) -> None:
        if self._master is None:
            return
        try:
            fcntl.ioctl(self._master, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))
        except OSError:
            pass

    # -- lifecycle --------------------------------------------------------------

    async def wait(self) -> int:
        code = await self._proc.wait()
        return 128 - code if code < 0 else code

    def kill(self) -> None:
        if self._proc.returncode is None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    async def close(self) -> None:
        self.kill()
        await self._proc.wait()
        for task in self._tasks:
            task.cancel()
        # gather returns the pumps' CancelledErrors; our own cancellation still raises
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._master is not None:
            try:
                asyncio.get_running_loop().remove_reader(self._master)
            except (ValueError, OSError):
                pass
            os.close(self._master)
            self._master = None
