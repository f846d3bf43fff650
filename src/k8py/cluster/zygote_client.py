"""The supervisor's side of ``k8py zygote``: ask it to fork a component, follow the child.

The zygote (``k8py.cli.zygote``, which may import every component; this
package may not) imports k8py once and forks each component from it, so a
component starts without an interpreter's import time and the imported pages
stay shared. :meth:`ZygoteClient.spawn` returns a :class:`ForkedProcess`
with the part of :class:`asyncio.subprocess.Process` the supervisor uses
(``pid``, ``returncode``, ``wait()``, ``send_signal()``), so supervision,
restarts with backoff and shutdown work alike for both kinds of process.

:func:`start_zygote` starts the zygote itself before there is an event loop
(``k8py up`` calls it before it even imports the supervisor, so that the
zygote's imports, which the API server waits for, overlap the supervisor's
own and the certificates it makes); :class:`PopenProcess` is that
``subprocess.Popen`` with the same part of the asyncio process interface.

Invariants: ``returncode`` is set exactly once, from the zygote's ``exit``
message (the wait status as a code, negative for a signal); when the zygote
dies first, the child's exit code is unknowable, so the child's process group
is killed and, once it has gone, ``returncode`` is -9 — never is a child left
running that the supervisor believes dead, which would start a second copy.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import time
from typing import Any

__all__ = ["ZygoteClient", "ForkedProcess", "ZygoteUnavailable", "PopenProcess", "start_zygote"]


class ZygoteUnavailable(OSError):
    """The zygote's socket does not answer; the caller starts a subprocess instead."""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


class ForkedProcess:
    def __init__(self, pid: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._reader, self._writer = reader, writer
        self._done = asyncio.Event()
        self._follow_task = asyncio.create_task(self._follow(), name=f"zygote-child-{pid}")

    async def _follow(self) -> None:
        code: int | None = None
        try:
            line = await self._reader.readline()
            if line:
                code = int(json.loads(line).get("exit"))
        except (OSError, ValueError, TypeError):
            code = None
        finally:
            self._writer.close()
        if code is None:  # the zygote died before the child: make sure the child is gone too
            with contextlib.suppress(OSError):
                os.killpg(self.pid, signal.SIGKILL)
            while _alive(self.pid):
                await asyncio.sleep(0.05)
            code = -signal.SIGKILL
        self.returncode = code
        self._done.set()

    async def wait(self) -> int:
        await self._done.wait()
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def start_zygote(argv: list[str], log: str) -> subprocess.Popen[bytes]:
    """The zygote's process, its own session, its output appended to ``log``
    (as the supervisor starts every component); no event loop needed."""
    os.makedirs(os.path.dirname(log), exist_ok=True)
    with open(log, "ab") as out:
        out.write(f"--- k8py up: starting zygote (restart 0) at {time.strftime('%Y-%m-%dT%H:%M:%S')}\n".encode())
        out.flush()
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


class PopenProcess:
    """A ``subprocess.Popen`` started before the event loop, adopted by the
    supervisor: ``returncode`` is current whenever it is read (a poll, which
    reaps only this pid), and ``wait()`` sleeps on a pidfd until it exits."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self._popen = popen
        self.pid = popen.pid

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()

    async def wait(self) -> int:
        if self._popen.poll() is None:
            try:
                fd = os.pidfd_open(self.pid)
            except (AttributeError, OSError):  # no pidfds (not Linux 5.3+): poll
                while self._popen.poll() is None:
                    await asyncio.sleep(0.1)
            else:
                loop = asyncio.get_running_loop()
                exited = loop.create_future()
                loop.add_reader(fd, lambda: exited.done() or exited.set_result(None))
                try:
                    if self._popen.poll() is None:
                        await exited
                finally:
                    loop.remove_reader(fd)
                    os.close(fd)
        return self._popen.wait()

    def send_signal(self, sig: int) -> None:
        if self._popen.poll() is None:
            self._popen.send_signal(sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class ZygoteClient:
    def __init__(self, socket_path: str) -> None:
        self.socket_path = socket_path

    async def wait_ready(self, timeout: float, alive: Any = lambda: True) -> bool:
        """True once the socket accepts (the zygote has preloaded the API server); False
        after ``timeout`` or as soon as ``alive()`` says the zygote process has gone."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline and alive():
            if os.path.exists(self.socket_path):
                return True
            await asyncio.sleep(0.01)
        return False

    async def spawn(self, argv: list[str], log: str) -> ForkedProcess:
        try:
            reader, writer = await asyncio.open_unix_connection(self.socket_path)
        except OSError as err:
            raise ZygoteUnavailable(f"the zygote at {self.socket_path} does not answer: {err}") from err
        try:
            writer.write(json.dumps({"argv": argv, "log": log}).encode() + b"\n")
            await writer.drain()
            answer = json.loads(await reader.readline() or b"{}")
        except (OSError, ValueError) as err:
            writer.close()
            raise ZygoteUnavailable(f"the zygote at {self.socket_path} did not fork {argv[:1]}: {err}") from err
        if "pid" not in answer:
            writer.close()
            raise ZygoteUnavailable(f"the zygote refused {argv[:1]}: {answer.get('error', 'no pid in its answer')}")
        return ForkedProcess(int(answer["pid"]), reader, writer)
