"""Runs the Verification section of docs/03-client-walkthrough.md.

The section's ``sh`` blocks say what to start and stop; this test does that
(a real API server in-process on SQLite, the example controller as real
processes) and understands exactly these lines, failing on any other:

- ``k8py apiserver ... &`` / ``export KUBECONFIG=...`` / ``kill %1``: the test's own server and kubeconfig;
- ``python examples/configmap_mirror.py ARGS & VAR=$!``: start a replica;
- ``sleep N``: wait until the Lease has a holder (at most 20 s: stronger than a sleep);
- ``kill -TERM $VAR``: stop that replica; it must exit 0 having released the Lease.

Every ``$ command`` of the ``console`` blocks runs in a shell at the
repository root with that kubeconfig; its stdout+stderr must equal the lines
that follow it. ``kubectl get`` commands are retried for up to 15 s (the
controller is asynchronous); others run once.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support.servers import ServerThread, sqlite_storage

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "03-client-walkthrough.md"
RETRY_SECONDS = 15.0


def verification_blocks() -> list[tuple[str, str]]:
    text = DOC.read_text()
    section = text.split("\n## Verification\n", 1)[1]
    return [(m.group(1), m.group(2)) for m in re.finditer(r"```(\w+)\n(.*?)```", section, re.S)]


def console_steps(block: str) -> list[tuple[str, list[str]]]:
    steps: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            steps[-1][1].append(line.rstrip())
    return steps


def normalize(output: str) -> list[str]:
    lines = [line.rstrip() for line in output.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


class Walkthrough:
    def __init__(self, server: ServerThread, home: Path) -> None:
        self.server = server
        self.kubeconfig = server.write_kubeconfig(str(home / "kubeconfig"))
        self.env = {**os.environ, "HOME": str(home), "KUBECONFIG": self.kubeconfig}
        self.replicas: dict[str, subprocess.Popen[str]] = {}

    def lease_holder(self) -> str:
        url = f"{self.server.url}/apis/coordination.k8s.io/v1/namespaces/default/leases/configmap-mirror"
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return json.load(response)["spec"].get("holderIdentity") or ""
        except OSError:
            return ""

    def shell_line(self, line: str) -> None:
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith(("k8py apiserver", "export KUBECONFIG=")) or line == "kill %1":
            return
        if m := re.fullmatch(r"python (examples/configmap_mirror\.py.*?) & (\w+)=\$!", line):
            argv = shlex.split(m.group(1))
            self.replicas[m.group(2)] = subprocess.Popen(
                [sys.executable, *argv], cwd=ROOT, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            )
            return
        if re.fullmatch(r"sleep \d+", line):
            deadline = time.monotonic() + 20
            while not self.lease_holder():
                assert time.monotonic() < deadline, "no replica took the Lease"
                time.sleep(0.1)
            return
        if m := re.fullmatch(r"kill -TERM \$(\w+)", line):
            proc = self.replicas.pop(m.group(1))
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=20)
            assert proc.returncode == 0, out
            assert "stopped; lease released" in out, out
            return
        raise AssertionError(f"the test does not understand this line of the walkthrough: {line!r}")

    def console_step(self, command: str, expected: list[str]) -> None:
        retry = command.startswith("kubectl get")
        deadline = time.monotonic() + (RETRY_SECONDS if retry else 0)
        while True:
            result = subprocess.run(command, shell=True, cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=60)
            actual = normalize(result.stdout + result.stderr)
            if actual == expected or time.monotonic() >= deadline:
                break
            time.sleep(0.2)
        assert actual == expected, f"$ {command}\nexpected:\n" + "\n".join(expected) + "\nactual:\n" + "\n".join(actual)

    def stop(self) -> None:
        for proc in self.replicas.values():
            proc.kill()
            proc.communicate(timeout=20)


@pytest.mark.kubectl
def test_the_client_walkthrough_verification_section_holds(tmp_path):
    blocks = verification_blocks()
    assert [lang for lang, _ in blocks].count("console") >= 5
    with ServerThread(sqlite_storage(str(tmp_path / "data")), bookmark_interval=1.0) as server:
        walk = Walkthrough(server, tmp_path / "home")
        try:
            for lang, body in blocks:
                if lang == "sh":
                    for line in body.splitlines():
                        walk.shell_line(line)
                elif lang == "console":
                    for command, expected in console_steps(body):
                        walk.console_step(command, expected)
                else:
                    raise AssertionError(f"unexpected block language {lang!r} in Verification")
        finally:
            walk.stop()
