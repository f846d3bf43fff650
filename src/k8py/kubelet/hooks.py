"""Lifecycle hooks: postStart and preStop (exec, httpGet, sleep), as upstream's handlers.

``run_hook`` returns "" on success or the failure message. An exec hook
runs inside the container; httpGet goes to the pod IP by default; ``sleep``
waits ``seconds``. The caller bounds the time (preStop runs within the
termination grace period).
"""

from __future__ import annotations

import asyncio
from typing import Any, Mapping

from k8py.kubelet.prober.probes import run_probe
from k8py.kubelet.runtime.protocols import StreamingRuntime

__all__ = ["run_hook"]


async def run_hook(handler: Mapping[str, Any], *, runtime: StreamingRuntime, container_id: str, container: Mapping[str, Any],
                   pod_ip: str, timeout: float) -> str:
    if "sleep" in handler:
        await asyncio.sleep(float(handler["sleep"].get("seconds") or 0))
        return ""
    if "exec" in handler:
        result = await runtime.exec_sync(container_id, list(handler["exec"].get("command") or []), timeout)
        if result.timed_out:
            return f"command timed out after {timeout:g}s"
        if result.exit_code != 0:
            out = (result.stdout + result.stderr).decode("utf-8", "replace").strip()
            return f"command '{' '.join(handler['exec'].get('command') or [])}' exited with {result.exit_code}: {out}"
        return ""
    if "httpGet" in handler:
        ok, out = await run_probe({"httpGet": handler["httpGet"], "timeoutSeconds": max(1, int(timeout))}, runtime=runtime,
                                  container_id=container_id, container=container, pod_ip=pod_ip)
        return "" if ok else out
    return "hook has no handler (exec, httpGet or sleep)"
