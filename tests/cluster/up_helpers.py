"""What the ``k8py up`` end-to-end tests share: running the command, and waiting on a condition."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Callable

__all__ = ["k8py", "log_tails", "wait_for"]


def k8py(*args: str, timeout: float = 150) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "k8py", *args], capture_output=True, text=True, timeout=timeout)


def log_tails(logs: tuple[str, ...], lines: int = 40) -> str:
    """The last ``lines`` of each of ``logs`` that exists, each under its path (for a failure's message)."""
    return "".join(f"\n--- {path} ends:\n" + "".join(open(path, errors="replace").readlines()[-lines:])
                   for path in logs if os.path.exists(path))


def wait_for(check: Callable[[], object], what: str, timeout: float = 90, logs: tuple[str, ...] = ()) -> object:
    """Poll ``check`` until it returns something true; on timeout, fail with the tails of ``logs``."""
    deadline = time.monotonic() + timeout
    while not (result := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}{log_tails(logs)}")
        time.sleep(0.2)
    return result
