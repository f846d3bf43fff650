"""hostPort in the loopback pod network: the node's address:hostPort relayed
to podIP:containerPort.

In the default (loopback) mode every pod shares the host's network and has
its own 127.x address, so there is nothing to DNAT: the runtime itself listens
on ``hostIP`` (or, when unset, the node's address — never a wildcard, so
traffic stays where the node's own address is) at ``hostPort`` and pipes each
TCP connection to the pod's IP and ``containerPort``, as the CNI portmap
plugin would with rules.

Invariants:
- a sandbox owns its listeners from ``open`` until ``close`` (its stop); a
  port another process (or pod) holds fails the sandbox with a clear error,
  and nothing is left half-open;
- only TCP: a UDP or SCTP hostPort is refused with what to do instead (the
  ``--pod-network=cni`` mode maps them with the portmap plugin);
- a restarted kubelet re-opens the listeners of the READY sandboxes it adopts.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Sequence

from k8py.kubelet.runtime.protocols import RuntimeErrorStatus

__all__ = ["HostPorts", "check_mappings"]

logger = logging.getLogger(__name__)

Mapping_ = tuple[str, int, int, str]


def check_mappings(mappings: Sequence[Mapping_]) -> None:
    """Refuse what the loopback relay cannot carry, before anything is allocated."""
    for protocol, _container_port, host_port, _host_ip in mappings:
        if host_port and protocol.upper() != "TCP":
            raise RuntimeErrorStatus(
                "FailedCreatePodSandBox",
                f"hostPort {host_port}/{protocol} is not supported by the loopback pod network (TCP only): "
                f"drop the hostPort and use a Service, or run the kubelet with --pod-network=cni",
            )


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        pass


class HostPorts:
    """Listeners per sandbox id."""

    def __init__(self, node_ip: str) -> None:
        self.node_ip = node_ip
        self._servers: dict[str, list[asyncio.base_events.Server]] = {}
        self._conns: set[asyncio.Task[None]] = set()

    async def open(self, sandbox_id: str, pod_ip: str, mappings: Sequence[Mapping_]) -> None:
        check_mappings(mappings)
        servers: list[asyncio.base_events.Server] = []
        for _protocol, container_port, host_port, host_ip in mappings:
            if not host_port:
                continue
            address = host_ip if host_ip not in ("", "0.0.0.0", "::") else self.node_ip
            try:
                servers.append(await asyncio.start_server(self._relay(pod_ip, container_port), address, host_port))
            except OSError as err:
                for s in servers:
                    s.close()
                raise RuntimeErrorStatus(
                    "FailedCreatePodSandBox",
                    f"cannot listen on hostPort {address}:{host_port} for the pod ({err.strerror}): another pod or "
                    f"process holds it; pick another hostPort or stop that process",
                ) from err
            logger.info("hostPort open", extra={"address": f"{address}:{host_port}", "target": f"{pod_ip}:{container_port}"})
        if servers:
            self._servers[sandbox_id] = servers

    def _relay(self, pod_ip: str, port: int):
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            if task is not None:
                self._conns.add(task)
            try:
                try:
                    up_reader, up_writer = await asyncio.open_connection(pod_ip, port)
                except OSError:
                    return  # nothing listens in the pod yet: the client sees the connection close
                try:
                    await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
                finally:
                    up_writer.close()
            finally:
                writer.close()
                if task is not None:
                    self._conns.discard(task)
        return handle

    def close(self, sandbox_id: str) -> None:
        for server in self._servers.pop(sandbox_id, []):
            server.close()

    async def close_all(self) -> None:
        for sid in list(self._servers):
            self.close(sid)
        for task in list(self._conns):
            task.cancel()
        await asyncio.gather(*self._conns, return_exceptions=True)
