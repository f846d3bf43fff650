"""Run one probe once; returns (success, output).

- exec: the command in the container (``exec_sync``); exit 0 succeeds;
- httpGet: a GET to ``host`` (default the pod IP) and ``port`` (number or
  container port name) with ``path`` and ``httpHeaders``; 200–399 succeed
  (redirects are not followed, as upstream does not follow them off-host);
- tcpSocket: a TCP connection opens;
- grpc: the standard ``grpc.health.v1.Health/Check`` on the pod IP; SERVING
  succeeds. It needs the optional ``grpcio`` package (``k8py[grpc]``); without
  it the probe fails and says so.

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


def _health_request(service: str) -> bytes:
    """grpc.health.v1.HealthCheckRequest: field 1 (service), a length-delimited string."""
    data = service.encode()
    return (b"\x0a" + _varint(len(data)) + data) if data else b""


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _health_status(msg: bytes) -> int:
    """HealthCheckResponse.status (field 1, a varint); 0 (UNKNOWN) when absent."""
    i = 0
    while i < len(msg):
        key = msg[i]
        i += 1
        if key == 0x08:
            value = shift = 0
            while i < len(msg):
                b = msg[i]
                i += 1
                value |= (b & 0x7F) << shift
                shift += 7
                if not b & 0x80:
                    break
            return value
        return 0
    return 0


_HEALTH = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}


async def _grpc(host: str, port: int, service: str, timeout: float) -> tuple[bool, str]:
    """The standard health check (grpc.health.v1.Health/Check) as upstream's gRPC probe makes it."""
    try:
        import grpc
    except ImportError:
        return False, "grpc probes need the grpcio package on the node (pip install 'k8py[grpc]')"
    async with grpc.aio.insecure_channel(f"{host}:{port}") as channel:
        check = channel.unary_unary("/grpc.health.v1.Health/Check")
        try:
            reply = await check(_health_request(service), timeout=timeout)
        except grpc.aio.AioRpcError as err:
            if err.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                return False, f"timeout: health rpc did not complete within {timeout:g}s"
            return False, f"error: health rpc probe failed: {err.code().name}: {err.details()}"
    status = _health_status(reply)
    if status == 1:
        return True, ""
    return False, f"service unhealthy (responded with \"{_HEALTH.get(status, status)}\")"


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
            return await _grpc(pod_ip, int(probe["grpc"]["port"]), probe["grpc"].get("service") or "", timeout)
    except ValueError as err:
        return False, str(err)
    except RuntimeErrorStatus as err:  # e.g. the container's process is not up yet
        return False, err.message
    except NotFoundError as err:
        return False, str(err)
    return False, "probe has no handler (exec, httpGet, tcpSocket or grpc)"
