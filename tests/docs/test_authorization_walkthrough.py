"""docs/14-authorization.md, run as written (the harness of the API server walkthrough)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.docs.test_apiserver_walkthrough import _INSTALL, missing, steps
from tests.support.kube import KUBECTL

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(not os.path.exists(KUBECTL), reason="kubectl not installed"),
]

DOC = Path(__file__).resolve().parents[2] / "docs" / "14-authorization.md"


def test_the_authorization_walkthrough_runs_as_written(tmp_path):
    work = tmp_path / "k8py-demo"
    home = tmp_path / "home"
    home.mkdir()
    text = DOC.read_text().replace("/tmp/k8py-demo", str(work))
    (start, start_expected), *rest = steps(text)
    assert "--authorization-mode Node,RBAC" in start and len(rest) == 3
    env = {**os.environ, "HOME": str(home), "KUBECONFIG": str(work / "kubeconfig")}
    server = subprocess.Popen(["bash", "-c", "exec " + start.strip().removeprefix(_INSTALL)], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True)
    printed: list[str] = []

    def read() -> None:
        assert server.stdout is not None
        for line in server.stdout:
            printed.append(line.rstrip("\n"))

    threading.Thread(target=read, daemon=True).start()
    try:
        deadline = time.monotonic() + 60
        while missing(start_expected, printed):
            assert server.poll() is None and time.monotonic() < deadline, "\n".join(printed)
            time.sleep(0.05)
        for script, expected in rest:
            done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=60)
            output = (done.stdout + done.stderr).splitlines()
            assert not missing(expected, output), f"{script}\nexpected {missing(expected, output)}\ngot:\n" + "\n".join(output)
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait(5)
