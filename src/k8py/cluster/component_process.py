"""One supervised component process: start it, restart it with backoff, stop it.

:class:`ComponentProcess` is what the supervisor keeps per component: its
:class:`~k8py.cluster.spec.ComponentSpec`, the live process (a subprocess, a
child the zygote forked, or the zygote itself adopted), its state
(``pending`` → ``starting`` → ``running``, ``restarting``, ``failed``,
``stopped``), whether its health endpoint has answered, and how often it was
restarted. The supervisor decides *when* (start order, readiness); this
module knows *how*.

Invariants:

- a component is one process in its own session (so Ctrl-C in the terminal
  reaches only the supervisor, and a signal to its process group reaches all
  it started), stdout and stderr appended to its log, which gets a line at
  each start;
- a component that exits while the cluster is not stopping is started again
  after ``backoff.initial`` seconds, doubling to ``backoff.max``, reset to one
  once it had run ``backoff.reset`` seconds (:meth:`Backoff.delay`); the API
  server exiting before it was ever healthy, before the cluster is ready, is
  not restarted: its state says ``failed`` and the supervisor reports it;
- :func:`terminate` sends SIGTERM to each live process of a group at once,
  then SIGKILL to the process group of any still alive after the grace.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Awaitable, Callable

from k8py.cluster.readiness import Prober
from k8py.cluster.spec import ComponentSpec
from k8py.cluster.zygote_client import AdoptedChild, ForkedProcess, ZygoteClient, ZygoteUnavailable

__all__ = ["ComponentProcess", "Backoff", "terminate"]

logger = logging.getLogger(__name__)

Process = asyncio.subprocess.Process | ForkedProcess | AdoptedChild


@dataclass(frozen=True)
class Backoff:
    """Restart delays: ``initial`` doubling to ``max``; a run of ``reset`` seconds forgives the past."""

    initial: float = 0.5
    max: float = 30.0
    reset: float = 60.0

    def delay(self, failures: int) -> float:
        return min(self.initial * 2 ** (failures - 1), self.max)


@dataclass
class ComponentProcess:
    spec: ComponentSpec
    proc: Process | None = None
    restarts: int = 0
    state: str = "pending"
    healthy: bool = False
    started_at: float = 0.0
    task: asyncio.Task[None] | None = field(default=None, repr=False)

    @property
    def pid(self) -> int | None:
        """The pid while the process runs."""
        return self.proc.pid if self.proc is not None and self.proc.returncode is None else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def spawn(self, zygote: ZygoteClient | None, clock: Callable[[], float]) -> None:
        """Start the process: forked by ``zygote`` when there is one and the
        command is ``python -m k8py …``, else as a subprocess."""
        with open(self.spec.log, "ab") as log:
            log.write(f"--- k8py up: starting {self.spec.name} (restart {self.restarts}) at {time.strftime('%Y-%m-%dT%H:%M:%S')}\n".encode())
            log.flush()
            self.proc = await self._fork(zygote) or await asyncio.create_subprocess_exec(
                *self.spec.argv, stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=asyncio.subprocess.STDOUT,
                start_new_session=True)
        self.started_at = clock()
        self.state = "starting"

    async def _fork(self, zygote: ZygoteClient | None) -> ForkedProcess | None:
        if zygote is None or self.spec.argv[:3] != [sys.executable, "-m", "k8py"]:
            return None
        try:
            return await zygote.spawn(self.spec.argv[3:], self.spec.log)
        except ZygoteUnavailable as err:
            logger.warning("starting a component as its own process", extra={"component": self.spec.name, "reason": str(err)})
            return None

    async def keep_running(self, *, backoff: Backoff, clock: Callable[[], float], stopping: Callable[[], bool],
                           fatal: Callable[[], bool], respawn: Callable[[], Awaitable[None]],
                           on_exit: Callable[[int, float], None]) -> None:
        """Wait for the process to exit and start it again (through ``respawn``)
        after the backoff, until ``stopping()``; returns at once, state ``failed``,
        if ``fatal()`` says this exit ends supervision. ``on_exit(code, delay)``
        is told of each restart before its delay."""
        failures = 0
        while True:
            assert self.proc is not None
            code = await self.proc.wait()
            if stopping():
                self.state = "stopped"
                return
            if fatal():
                self.state = "failed"
                return
            failures = 1 if clock() - self.started_at > backoff.reset else failures + 1
            delay = backoff.delay(failures)
            self.state, self.healthy = "restarting", False
            on_exit(code, delay)
            await asyncio.sleep(delay)
            if stopping():
                self.state = "stopped"
                return
            self.restarts += 1
            await respawn()

    async def wait_healthy(self, prober: Prober, stopping: Callable[[], bool]) -> bool:
        """Poll the health URL until it answers once (True), or the process
        exits or the cluster stops (False)."""
        delay = 0.02
        while self.alive() and not stopping():
            if await prober.ok(self.spec.health):
                self.healthy, self.state = True, "running"
                return True
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, 0.1)
        return False


async def terminate(group: list[ComponentProcess], grace: float) -> None:
    """SIGTERM to every live process of ``group``, SIGKILL to the process
    groups of those still alive after ``grace`` seconds; returns once all have exited."""
    live = [c for c in group if c.alive()]
    for c in live:
        with contextlib.suppress(ProcessLookupError):
            c.proc.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
    if not live:
        return
    waits = [asyncio.create_task(c.proc.wait(), name=f"wait-{c.spec.name}") for c in live]  # type: ignore[union-attr]
    _done, pending = await asyncio.wait(waits, timeout=grace)
    for c in live:
        if c.alive():
            logger.warning("component did not stop in time; killing it", extra={"component": c.spec.name})
            with contextlib.suppress(ProcessLookupError):
                os.killpg(c.proc.pid, signal.SIGKILL)  # type: ignore[union-attr]
    if pending:
        await asyncio.wait(pending)
