"""``python -m k8py scheduler`` as a child process, for command-level tests."""

from __future__ import annotations

import collections
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request


class SchedulerProcess:
    def __init__(self, kubeconfig: str, *args: str) -> None:
        self.cmd = [sys.executable, "-m", "k8py", "scheduler", "--kubeconfig", kubeconfig, *args]
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""
        self.output: collections.deque[str] = collections.deque(maxlen=200)

    def start(self, timeout: float = 30) -> "SchedulerProcess":
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.output.append(line)
            m = re.search(r"on (http://\S+)", line)
            if m:
                self.url = m.group(1)
                threading.Thread(target=self._drain, daemon=True).start()
                return self
        raise RuntimeError("scheduler did not start:\n" + "".join(self.output))

    def _drain(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line)

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()

    def wait_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.get("/readyz")[0] == 200:
                return
            time.sleep(0.05)
        raise AssertionError("scheduler never ready:\n" + "".join(self.output))

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(30)

    def __enter__(self) -> "SchedulerProcess":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill(signal.SIGTERM)
