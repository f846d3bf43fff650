"""The benchmarks' handle on the processes they measure: start a component
(``python -m k8py ...``) and learn its address, read its CPU and memory from
``/proc``, py-spy it, scrape its ``/metrics``, stop it.

A started process's output is drained on a thread for as long as it runs (a
full pipe would block it mid-benchmark); the last line each printed is kept
in :data:`LAST_LINES` for error messages.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
from collections import Counter
from typing import Any

import orjson

from http_load import HttpConnection

__all__ = ["start", "stop", "rss", "cpu_seconds", "start_profilers", "stop_profilers", "get_json", "ready",
           "metric", "metric_counts", "LAST_LINES"]

DRAINED: dict[str, int] = {}
LAST_LINES: dict[str, str] = {}


def start(cmd: list[str], pattern: str) -> tuple[subprocess.Popen, str]:
    """Start ``cmd`` and wait for a line matching ``pattern``; returns the process and group 1."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        m = re.search(pattern, line)
        if m:
            # keep reading what it prints, or a full pipe would block the process
            threading.Thread(target=_drain, args=(proc, cmd[3]), daemon=True).start()
            return proc, m.group(1)
    raise RuntimeError(f"{cmd[3]} did not start")


def _drain(proc: subprocess.Popen, name: str) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        DRAINED[name] = DRAINED.get(name, 0) + 1
        LAST_LINES[name] = line.rstrip()


def stop(proc: subprocess.Popen | None) -> None:
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_profilers(directory: str | None, kind: str, pids: dict[str, int]) -> list[subprocess.Popen]:
    """``py-spy record`` on each process for the measured window (into ``DIR/<kind>-<name>.raw``)."""
    if not directory:
        return []
    os.makedirs(directory, exist_ok=True)
    return [subprocess.Popen(["py-spy", "record", "--pid", str(pid), "--nonblocking", "--rate", "50", "--format", "raw",
                              "--output", os.path.join(directory, f"{kind}-{name}.raw")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for name, pid in pids.items()]


def stop_profilers(spies: list[subprocess.Popen]) -> None:
    for spy in spies:
        spy.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
    for spy in spies:
        try:
            spy.wait(60)
        except subprocess.TimeoutExpired:
            spy.kill()
            spy.wait()


async def _get(addr: str, path: str) -> tuple[int, bytes]:
    conn = await HttpConnection.open(addr)
    try:
        return await conn.request("GET", path)
    finally:
        conn.close()


async def get_json(addr: str, path: str) -> Any:
    status, body = await _get(addr, path)
    return orjson.loads(body) if status == 200 else None


async def ready(url: str) -> bool:
    status, _ = await _get(url.split("//", 1)[1], "/readyz")
    return status == 200


async def metric(url: str, name: str) -> float:
    """The first sample whose line starts with ``name`` (a metric name with its labels)."""
    _, body = await _get(url.split("//", 1)[1], "/metrics")
    for line in body.decode().splitlines():
        if line.startswith(name):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


_SAMPLE = re.compile(r'^(\w+)\{(.*)\} (\S+)$')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


async def metric_counts(url: str, name: str, labels: tuple[str, ...]) -> Counter[tuple[str, ...]]:
    """The samples of counter ``name`` summed by the values of ``labels``
    (e.g. ``apiserver_request_total`` by verb and resource)."""
    _, body = await _get(url.split("//", 1)[1], "/metrics")
    out: Counter[tuple[str, ...]] = Counter()
    for line in body.decode().splitlines():
        m = _SAMPLE.match(line)
        if m is None or m.group(1) != name:
            continue
        found = dict(_LABEL.findall(m.group(2)))
        out[tuple(found.get(label, "") for label in labels)] += float(m.group(3))
    return out
