"""Entering a running container of the process runtime, and ExecSync.

Under bubblewrap a command enters the container's pid, ipc, uts and mount
namespaces with ``nsenter`` (root and working directory too), targeting the
container's command process (the namespace init's child); it then sees the
container's volumes, private /tmp and hostname, and runs with the
container's environment. Without bubblewrap the command simply runs on the
host with that environment, in the container's working directory. Either way it runs through
the container's ``setpriv`` prefix, so it has the container's user, groups and capabilities.
"""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any, Mapping, Sequence

from k8py.kubelet.runtime.process import launcher
from k8py.kubelet.runtime.protocols import ExecResult, ExecSpec, RuntimeErrorStatus

__all__ = ["exec_spec", "run"]


def exec_spec(rec: Mapping[str, Any], cmd: Sequence[str], *, ns_init: int, fallback_cwd: str) -> ExecSpec:
    # the command runs with the container's user, groups and capabilities (its setpriv prefix)
    cmd = [*rec.get("setpriv", []), *cmd]
    if not rec["bwrap"]:
        cwd = rec["cwd"] if rec["cwd"] and os.path.isdir(rec["cwd"]) else fallback_cwd
        return ExecSpec(list(cmd), dict(rec["env"]), cwd)
    target = launcher.command_pid(rec["pid"], ns_init, True)
    if not target:
        raise RuntimeErrorStatus("ContainerNotRunning", f"container {rec['name']} has no process to enter yet")
    return ExecSpec(launcher.nsenter_argv(target, rec["cwd"] or "/", cmd, rec.get("user")), dict(rec["env"]), "/")


async def run(spec: ExecSpec, timeout: float) -> ExecResult:
    """Run to completion with pipes; past ``timeout`` the process group is killed."""
    try:
        proc = await asyncio.create_subprocess_exec(*spec.argv, env=dict(spec.env), cwd=spec.cwd, stdin=asyncio.subprocess.DEVNULL,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True)
    except OSError as err:
        return ExecResult(126, b"", str(err).encode())
    try:
        out, err_out = await asyncio.wait_for(proc.communicate(), timeout if timeout > 0 else None)
    except asyncio.TimeoutError:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        await proc.wait()
        return ExecResult(-1, b"", b"", timed_out=True)
    return ExecResult(proc.returncode or 0, out, err_out)
