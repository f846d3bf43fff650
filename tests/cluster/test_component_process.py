"""One supervised process (k8py.cluster.component_process): backoff, restarts, termination, with real processes."""

from __future__ import annotations

import asyncio
import os
import sys
import time

from k8py.cluster.component_process import Backoff, ComponentProcess, terminate
from k8py.cluster.spec import ComponentSpec

STUBBORN = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('ignoring SIGTERM', flush=True); time.sleep(120)")


def _component(tmp_path, name: str, code: str) -> ComponentProcess:
    return ComponentProcess(ComponentSpec(name, [sys.executable, "-c", code], str(tmp_path / f"{name}.log"), ""))


async def _log_says(path: str, text: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not (os.path.exists(path) and text in open(path).read()):
        assert time.monotonic() < deadline, open(path).read() if os.path.exists(path) else "no log"
        await asyncio.sleep(0.02)


def test_backoff_doubles_to_its_cap():
    assert [Backoff(initial=0.5, max=4.0).delay(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 4.0, 4.0]


async def test_a_process_that_ignores_sigterm_is_killed_after_the_grace(tmp_path):
    c = _component(tmp_path, "stubborn", STUBBORN)
    await c.spawn(None, time.monotonic)
    assert c.state == "starting" and c.pid is not None
    await _log_says(c.spec.log, "ignoring SIGTERM")
    assert open(c.spec.log).read().startswith("--- k8py up: starting stubborn (restart 0)")
    await terminate([c], grace=0.2)
    assert c.proc is not None and c.proc.returncode == -9 and c.pid is None


async def test_an_exited_process_is_started_again_after_its_backoff_and_counted(tmp_path):
    c = _component(tmp_path, "flaky", "print('ran', flush=True)")
    exits: list[tuple[int, float]] = []
    stopping = False

    async def respawn() -> None:
        await c.spawn(None, time.monotonic)

    await c.spawn(None, time.monotonic)
    task = asyncio.create_task(c.keep_running(backoff=Backoff(initial=0.05, max=0.1, reset=60.0), clock=time.monotonic,
                                              stopping=lambda: stopping, fatal=lambda: False, respawn=respawn,
                                              on_exit=lambda code, delay: exits.append((code, delay))),
                               name="keep-running-under-test")
    try:
        deadline = time.monotonic() + 60
        while c.restarts < 3:
            assert time.monotonic() < deadline, exits
            await asyncio.sleep(0.02)
        assert exits[:3] == [(0, 0.05), (0, 0.1), (0, 0.1)]  # doubling to the cap, each exit code as it was
        assert open(c.spec.log).read().count("--- k8py up: starting flaky") >= 4
    finally:
        stopping = True
        await asyncio.wait_for(task, 30)
    assert c.state == "stopped"


async def test_an_exit_that_is_fatal_ends_supervision_as_failed(tmp_path):
    c = _component(tmp_path, "apiserver", "raise SystemExit(3)")
    await c.spawn(None, time.monotonic)

    async def respawn() -> None:
        raise AssertionError("a fatal exit is not restarted")

    await asyncio.wait_for(c.keep_running(backoff=Backoff(), clock=time.monotonic, stopping=lambda: False, fatal=lambda: True,
                                          respawn=respawn, on_exit=lambda code, delay: None), 60)
    assert c.state == "failed" and c.proc is not None and c.proc.returncode == 3
