"""A walkthrough's Verification section, as steps a test runs under bash.

The section (from ``## Verification`` to the end of the document) holds
``console`` blocks: a line starting ``$ `` is a command, the lines after it
its expected output, where ``…`` stands for any text. :func:`run_step` runs
one command with ``bash -c`` and returns what is missing: the expected lines
must appear in the output in order (other lines may come between them), so
a step states what matters and leaves out what varies. A command ending in
``&`` keeps running (:class:`Background`): its output is read until the
expected lines have appeared.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

__all__ = ["verification_steps", "pattern", "missing_lines", "run_step", "Background", "k8py_shim"]


def verification_steps(text: str) -> list[tuple[str, list[str]]]:
    """(command, expected lines) of every ``console`` block after ``## Verification``."""
    section = text.split("## Verification", 1)[1]
    steps: list[tuple[str, list[str]]] = []
    for block in re.findall(r"```console\n(.*?)```", section, re.S):
        for line in block.splitlines():
            if line.startswith("$ "):
                steps.append((line[2:], []))
            elif line.strip():
                steps[-1][1].append(line)
    return steps


def pattern(expected: str) -> re.Pattern[str]:
    return re.compile("^" + ".*?".join(re.escape(part) for part in expected.split("…")) + "$")


def missing_lines(expected: list[str], output: list[str]) -> list[str]:
    """Expected lines not found, in order, among the output lines."""
    todo = list(expected)
    for line in output:
        if todo and pattern(todo[0]).match(line.strip("\r").rstrip()):
            todo.pop(0)
    return todo


def run_step(command: str, expected: list[str], env: dict[str, str], *, timeout: float = 180) -> tuple[list[str], list[str]]:
    """Run ``command`` under bash; (expected lines missing from its output, the output lines)."""
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env, timeout=timeout)
    output = (done.stdout + done.stderr).replace("\r", "\n").splitlines()
    return missing_lines(expected, output), output


def k8py_shim(bin_dir: Path) -> str:
    """A ``k8py`` on PATH that runs this interpreter's k8py (the checkout under test, not an
    installed copy); returns the PATH to use."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    shim = bin_dir / "k8py"
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m k8py "$@"\n')
    shim.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"


class Background:
    """A ``&`` command: output collected by a thread."""

    def __init__(self, command: str, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            ["bash", "-c", f"exec {command}"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, env=env, start_new_session=True,
        )
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, expected: list[str], timeout: float = 30.0) -> list[str]:
        deadline = time.monotonic() + timeout
        while missing_lines(expected, self.lines) and time.monotonic() < deadline and self.proc.poll() is None:
            time.sleep(0.05)
        time.sleep(0.05)
        return missing_lines(expected, list(self.lines))

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
