"""The process runtime's state on disk, so a restarted kubelet adopts its containers.

``<state-dir>/sandboxes/<id>.json`` and ``<state-dir>/containers/<id>/record.json``
hold what the runtime knows (config, state, pids, times, exit code). They are
written atomically (temp file + rename) on every state change.

Identity: a pid alone is not proof that a process is ours (pids are
reused). Each record keeps the process's start time from ``/proc/<pid>/stat``
(field 22, in clock ticks since boot); a process is adopted only when both
match, so the runtime never signals a process it did not start.
"""

from __future__ import annotations

import json
import os
from typing import Any

__all__ = ["write_record", "read_records", "process_start_ticks", "is_same_process", "disk_usage"]


def write_record(path: str, data: dict[str, Any]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def read_records(pattern_dir: str, name: str | None = None) -> list[dict[str, Any]]:
    """Every record under ``pattern_dir`` (``*.json``, or ``*/<name>`` when ``name`` given)."""
    out = []
    try:
        entries = sorted(os.listdir(pattern_dir))
    except FileNotFoundError:
        return out
    for entry in entries:
        path = os.path.join(pattern_dir, entry, name) if name else os.path.join(pattern_dir, entry)
        if not path.endswith(".json"):
            continue
        try:
            with open(path, encoding="utf-8") as f:
                out.append(json.load(f))
        except (FileNotFoundError, NotADirectoryError, ValueError):
            continue
    return out


def process_start_ticks(pid: int) -> int:
    """Field 22 of /proc/<pid>/stat, or 0 if the process is gone (or a zombie)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return 0
    # the command (field 2) may contain spaces and parentheses: split after the last ')'
    fields = stat[stat.rfind(")") + 2 :].split()
    if fields and fields[0] in ("Z", "X"):  # exited, not yet reaped by its (new) parent
        return 0
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return 0


def is_same_process(pid: int, start_ticks: int) -> bool:
    return pid > 0 and start_ticks > 0 and process_start_ticks(pid) == start_ticks


def disk_usage(path: str) -> int:
    """Bytes allocated to the files under ``path`` (as ``du`` counts them)."""
    size = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                size += os.lstat(os.path.join(root, f)).st_blocks * 512
            except OSError:  # written or removed as we walk
                continue
    return size
