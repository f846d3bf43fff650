"""What the ``k8py up`` end-to-end tests share: running the command, and waiting on a condition."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Callable

__all__ = ["k8py", "wait_for"]


def k8py(*args: str, timeout: float = 150) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "k8py", *args], capture_output=True, text=True, timeout=timeout)


def wait_for(check: Callable[[], object], what: str, timeout: float = 90, logs: tuple[str, ...] = ()) -> object:
    """Poll ``check`` until it returns something true; on timeout, fail with the tails of ``logs``."""
    deadline = time.monotonic() + timeout
    while not (result := check()):
        if time.monotonic() > deadline:
            tails = "".join(f"\n--- {path} ends:\n" + "".join(open(path, errors="replace").readlines()[-40:])
                            for path in logs if os.path.exists(path))
            raise AssertionError(f"timed out waiting for {what}{tails}")
        time.sleep(0.2)
    return result
