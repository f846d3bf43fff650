"""docs/02-etcd.md's Verification section, run as written.

Every ``console`` block of the section is parsed into commands (``$ `` lines)
and their expected output (the lines after, ``…`` matching any text). Each
command runs under bash with ``WORK``, ``PORT_A``, ``PORT_B``, ``PORT_C`` set
to a temporary directory and free ports; its expected lines must appear in its
output in order. A command ending in ``&`` keeps running: its output is read
until the expected lines have appeared, and an ``--etcd-servers=URLS`` line in
it sets ``ETCD``, as the doc tells the reader to. Background processes are
stopped (SIGTERM, then SIGKILL) at the end.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from tests.support.doc_steps import Background, missing_lines, verification_steps
from tests.support.etcd import etcd_installed
from tests.support.kube import KUBECTL

pytestmark = [
    pytest.mark.etcd,
    pytest.mark.kubectl,
    pytest.mark.slow,
    pytest.mark.timeout(120),
    pytest.mark.skipif(not etcd_installed(), reason="etcd not installed"),
    pytest.mark.skipif(not os.path.exists(KUBECTL), reason="kubectl not installed"),
]

DOC = Path(__file__).resolve().parents[2] / "docs" / "02-etcd.md"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_docs_parse_into_verification_steps():
    steps = verification_steps(DOC.read_text())
    commands = [c for c, _ in steps]
    assert any(c.startswith("k8py etcd") and c.endswith("&") for c in commands)
    assert sum(c.startswith("k8py apiserver") and "--etcd-servers $ETCD" in c for c in commands) == 2
    assert any(c.startswith("k8py migrate") for c in commands)
    assert all(expected for _, expected in steps), "every step states its expected output"


def test_the_etcd_walkthrough_verification_runs_as_written(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {
        **os.environ,
        "HOME": str(home),  # kubectl's discovery cache
        "WORK": str(tmp_path / "work"),
        "PORT_A": str(free_port()),
        "PORT_B": str(free_port()),
        "PORT_C": str(free_port()),
    }
    background: list[Background] = []
    try:
        for command, expected in verification_steps(DOC.read_text()):
            if command.endswith("&"):
                proc = Background(command[:-1].strip(), env)
                background.append(proc)
                missing = proc.wait_for(expected)
                output = proc.lines
                for line in output:
                    m = re.match(r"--etcd-servers=(\S+)", line)
                    if m:
                        env["ETCD"] = m.group(1)
            else:
                done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env, timeout=60)
                output = (done.stdout + done.stderr).replace("\r", "\n").splitlines()
                missing = missing_lines(expected, output)
            assert not missing, f"$ {command}\nexpected {missing}\ngot:\n" + "\n".join(output)
    finally:
        for proc in reversed(background):
            proc.stop()
        shutil.rmtree(tmp_path / "work", ignore_errors=True)
