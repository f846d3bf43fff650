"""docs/01-apiserver.md, run as written: its own commands, so the doc cannot drift.

Every ``sh`` block of the doc followed by an output block is a step: the
commands run under bash (the doc's ``/tmp/k8py-demo`` replaced by a temporary
directory, ``KUBECONFIG`` exported as the doc tells the reader), and every
line of the output block must appear in what they printed (``…`` matches any
text, runs of spaces match any spacing, numbers and ``PORT`` match any
number). Step 1 (``pip install . && k8py apiserver ...``) starts the server
in the background, without the install (the package is installed).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.support.kube import KUBECTL

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(not os.path.exists(KUBECTL), reason="kubectl not installed"),
]

DOC = Path(__file__).resolve().parents[2] / "docs" / "01-apiserver.md"
_INSTALL = "pip install . && "


def steps(text: str) -> list[tuple[str, list[str]]]:
    """(script, expected lines) for each ``sh`` block whose next block is an output block."""
    blocks = re.findall(r"^```(\w*)\n(.*?)^```$", text, re.S | re.M)
    out = []
    for (lang, script), (next_lang, expected) in zip(blocks, blocks[1:]):
        if lang == "sh" and next_lang == "":
            out.append((script, [line for line in expected.splitlines() if line.strip()]))
    return out


def _pattern(expected: str) -> re.Pattern[str]:
    parts = []
    for piece in re.split(r"(…|PORT|\d+(?:\.\d+)*|\s+)", expected.strip()):
        if piece == "…":
            parts.append(".*?")
        elif piece == "PORT" or re.fullmatch(r"\d+(?:\.\d+)*", piece or "x"):
            parts.append(r"\d+(?:\.\d+)*")
        elif piece and piece.isspace():
            parts.append(r"\s+")
        elif piece:
            parts.append(re.escape(piece))
    return re.compile("^" + "".join(parts) + "$")


def missing(expected: list[str], output: list[str]) -> list[str]:
    lines = [line.strip() for line in output]
    return [e for e in expected if not any(_pattern(e).match(line) for line in lines)]



def run_walkthrough(start: str, start_expected: list[str], rest: list[tuple[str, list[str]]], *, work: Path,
                    home: Path) -> None:
    """Start the doc's server step, wait for the lines it promises, then run every other step
    and check its promised output; the server is stopped whatever happens. Shared by the
    walkthroughs that begin with ``k8py apiserver``."""
    env = {**os.environ, "HOME": str(home), "KUBECONFIG": str(work / "kubeconfig")}
    server = subprocess.Popen(
        ["bash", "-c", "exec " + start.strip().removeprefix(_INSTALL)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, env=env, start_new_session=True,
    )
    printed: list[str] = []

    def read() -> None:
        assert server.stdout is not None
        for line in server.stdout:
            printed.append(line.rstrip("\n"))

    threading.Thread(target=read, daemon=True).start()
    try:
        deadline = time.monotonic() + 60
        while missing(start_expected, printed):  # polls the server's own output, not the clock
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

def test_the_doc_parses_into_steps():
    found = steps(DOC.read_text())
    assert found[0][0].startswith(_INSTALL + "k8py apiserver")
    scripts = "".join(script for script, _ in found)
    for command in ("kubectl get namespaces", "kubectl apply -f -", "curl -sN", "kubectl patch", "kubectl replace -f -"):
        assert command in scripts
    assert all(expected for _, expected in found), "every step states its expected output"


def test_the_apiserver_walkthrough_runs_as_written(tmp_path):
    work = tmp_path / "k8py-demo"
    home = tmp_path / "home"
    home.mkdir()
    text = DOC.read_text().replace("/tmp/k8py-demo", str(work))
    (start, start_expected), *rest = steps(text)
    run_walkthrough(start, start_expected, rest, work=work, home=home)
