"""``DATA_DIR/cluster.json``: what the supervisor of one data directory runs.

Written atomically (temp file + rename) by the supervisor on every change, so
a reader never sees half a document. ``pid`` is the supervisor's; a state
whose supervisor pid is gone is stale (the supervisor was SIGKILLed), and
:func:`running_state` treats it as "not running".
"""

from __future__ import annotations

import json
import os
from typing import Any

__all__ = ["STATE_FILE", "state_path", "read_state", "write_state", "pid_alive", "running_state"]

STATE_FILE = "cluster.json"


def state_path(data_dir: str) -> str:
    return os.path.join(data_dir, STATE_FILE)


def read_state(data_dir: str) -> dict[str, Any] | None:
    try:
        with open(state_path(data_dir)) as f:
            state: dict[str, Any] = json.load(f)
            return state
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def write_state(data_dir: str, state: dict[str, Any]) -> None:
    path = state_path(data_dir)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(state, f, indent=1)
    os.replace(tmp, path)


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (exited, not yet reaped) is not running
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def running_state(data_dir: str) -> dict[str, Any] | None:
    """The state if its supervisor is alive, else None."""
    state = read_state(data_dir)
    if state and pid_alive(state.get("pid")):
        return state
    return None
