"""Run one probe once; returns (success, output).

- exec: the command in the container (``exec_sync``); exit 0 succeeds;
- httpGet: a GET to ``host`` (default the pod IP) and ``port`` (number or
  container port name) with ``path`` and ``httpHeaders``; 200–399 succeed
  (redirects are not followed, as upstream does not follow them off-host);
- tcpSocket: a TCP connection opens;
- grpc: the standard ``grpc.health.v1.Health/Check`` — needs the optional
  ``grpcio`` package; without it the probe fails and says so.

A probe that takes longer than ``timeoutSeconds`` fails ("timeout").
"""

from __future__ import annotations

import asyncio
from typing import Any, Mapping

from k8py.kubelet.runtime.protocols import NotFoundError, RuntimeErrorStatus, StreamingRuntime

__all__ = ["run_probe", "resolve_port"]


def resolve_port(port: Any, container: Mapping[str, Any]) -> int:
    if isinstance(port, int) or (isinstance(port, str) and port.isdigit()):
        return int(port)
    for p in container.get("ports") or []:
        if p.get("name") == port:
            return int(p["containerPort"])
    raise ValueError(f"port {port!r} is not a number and no container port has that name")


async def _http(host: str, port: int, spec: Mapping[str, Any], timeout: float) -> tuple[bool, str]:
    path = spec.get("path") or "/"
    headers = {"Host": f"{host}:{port}", "User-Agent": "kube-probe/1.32", "Accept": "*/*", "Connection": "close"}
    for h in spec.get("httpHeaders") or []:
        headers[h["name"]] = h["value"]
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    try:
        writer.write((f"GET {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n").encode())
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), timeout)
        parts = line.decode("latin-1").split(" ", 2)
        code = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
        if 200 <= code < 400:
            return True, ""
        return False, f"HTTP probe failed with statuscode: {code}"
    finally:
        writer.close()


async def run_probe(probe: Mapping[str, Any], *, runtime: StreamingRuntime, container_id: str, container: Mapping[str, Any],
                    pod_ip: str) -> tuple[bool, str]:
    timeout = float(probe.get("timeoutSeconds") or 1)
    try:
        if "exec" in probe:
            result = await runtime.exec_sync(container_id, list(probe["exec"].get("command") or []), timeout)
            if result.timed_out:
                return False, f"command timed out after {timeout:g}s"
            out = (result.stdout + result.stderr).decode("utf-8", "replace")
            return result.exit_code == 0, out if result.exit_code == 0 else (out or f"command exited with {result.exit_code}")
        if "httpGet" in probe:
            spec = probe["httpGet"]
            host = spec.get("host") or pod_ip
            port = resolve_port(spec.get("port"), container)
            try:
                return await _http(host, port, spec, timeout)
            except asyncio.TimeoutError:
                return False, f'Get "http://{host}:{port}{spec.get("path") or "/"}": context deadline exceeded'
            except OSError as err:
                return False, f'Get "http://{host}:{port}{spec.get("path") or "/"}": dial tcp {host}:{port}: connect: {err.strerror or err}'
        if "tcpSocket" in probe:
            spec = probe["tcpSocket"]
            host = spec.get("host") or pod_ip
            port = resolve_port(spec.get("port"), container)
            try:
                _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
                writer.close()
                return True, ""
            except (OSError, asyncio.TimeoutError) as err:
                return False, f"dial tcp {host}:{port}: connect: {getattr(err, 'strerror', None) or 'timeout'}"
        if "grpc" in probe:
            try:
                import grpc  # noqa: F401
            except ImportError:
                return False, "grpc probes need the grpcio package on the node (pip install grpcio)"
            return False, "grpc probes are not implemented by k8py's kubelet yet"
    except ValueError as err:
        return False, str(err)
    except RuntimeErrorStatus as err:  # e.g. the container's process is not up yet
        return False, err.message
    except NotFoundError as err:
        return False, str(err)
    return False, "probe has no handler (exec, httpGet, tcpSocket or grpc)"
