"""The supervisor's side of ``k8py zygote``: ask it to fork a component, follow the child.

The zygote (``k8py.cli.zygote``, which may import every component; this
package may not) imports k8py once and forks each component from it, so a
component starts without an interpreter's import time and the imported pages
stay shared. :meth:`ZygoteClient.spawn` returns a :class:`ForkedProcess`
with the part of :class:`asyncio.subprocess.Process` the supervisor uses
(``pid``, ``returncode``, ``wait()``, ``send_signal()``), so supervision,
restarts with backoff and shutdown work alike for both kinds of process.

``k8py up`` starts the zygote itself, before it even imports the supervisor
(by forking itself: ``k8py.cli.zygote.fork_serve``), so that the zygote's
imports, which the API server waits for, overlap the supervisor's own and the
certificates it makes; :class:`AdoptedChild` is that child's pid with the
same part of the asyncio process interface.

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
from typing import Any

__all__ = ["ZygoteClient", "ForkedProcess", "ZygoteUnavailable", "AdoptedChild"]


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


class AdoptedChild:
    """A child process this process started before its event loop (``k8py up``
    forks the zygote out of itself first), adopted by the supervisor:
    ``returncode`` is current whenever it is read (a ``waitpid`` of this pid
    only, which reaps it), and ``wait()`` sleeps on a pidfd until it exits."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._code: int | None = None

    @property
    def returncode(self) -> int | None:
        if self._code is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped by someone else: its code is lost
                self._code = -signal.SIGKILL
            else:
                if pid:
                    self._code = os.waitstatus_to_exitcode(status)
        return self._code

    async def wait(self) -> int:
        if self.returncode is None:
            try:
                fd = os.pidfd_open(self.pid)
            except (AttributeError, OSError):  # no pidfds (not Linux 5.3+): poll
                while self.returncode is None:
                    await asyncio.sleep(0.1)
            else:
                loop = asyncio.get_running_loop()
                exited = loop.create_future()
                loop.add_reader(fd, lambda: exited.done() or exited.set_result(None))
                try:
                    if self.returncode is None:
                        await exited
                finally:
                    loop.remove_reader(fd)
                    os.close(fd)
        while self.returncode is None:  # the pidfd said it exited: reaped at once, or very nearly
            await asyncio.sleep(0.01)
        return self._code  # type: ignore[return-value]

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, sig)

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

    async def retire(self) -> bool:
        """Ask the zygote to retire (fork nothing more, become a reaper of its
        children, see ``k8py.cli.zygote_reaper``); True once it said it does.
        The children's connections go on reporting their exits as before."""
        try:
            reader, writer = await asyncio.open_unix_connection(self.socket_path)
        except OSError:
            return False
        try:
            writer.write(b'{"retire": true}\n')
            await writer.drain()
            answer = json.loads(await reader.readline() or b"{}")
        except (OSError, ValueError):
            return False
        finally:
            writer.close()
        return answer.get("retired") is True

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
