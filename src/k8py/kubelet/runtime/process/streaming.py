"""The process runtime's streaming calls: what exec, attach and port-forward need of a container.

The kubelet's server (:mod:`k8py.kubelet.server`) runs the streams; the runtime says how:
``exec_spec`` is the argv, env and cwd that enter a running container (nsenter into its
namespaces under bubblewrap, and into its pod's network namespace when it has one);
``attach_fifo`` the stdin FIFO an attach writes to (none once a ``stdinOnce`` container's
stdin was closed); ``attach_terminal`` a ``tty: true`` container's pty; ``close_stdin`` ends
a ``stdinOnce`` container's stdin for good, as containerd does.

:class:`StreamingEndpoints` is a part of :class:`~.runtime.ProcessRuntime`, split out by
concern: it reads the runtime state annotated below and uses the runtime's record helpers;
it is not used on its own.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING, Any, Sequence

from k8py.kubelet.network.pod_network import CNIPodNetwork
from k8py.kubelet.runtime.process import console_holder, container_exec
from k8py.kubelet.runtime.process.sandboxes import Sandboxes
from k8py.kubelet.runtime.process.terminal import Terminal
from k8py.kubelet.runtime.protocols import ContainerState, ExecResult, ExecSpec, RuntimeErrorStatus

__all__ = ["StreamingEndpoints"]

logger = logging.getLogger(__name__)


class StreamingEndpoints:
    # the runtime's state this part uses (set by ProcessRuntime.__init__)
    sandboxes: Sandboxes
    _terminals: dict[str, Terminal]

    if TYPE_CHECKING:  # ProcessRuntime's own
        def _rec(self, cid: str) -> dict[str, Any]: ...

        def _cdir(self, cid: str) -> str: ...

        def _ns_init(self, rec: dict[str, Any]) -> int: ...

        def _save(self, rec: dict[str, Any]) -> None: ...

    async def exec_spec(self, container_id: str, cmd: Sequence[str], *, tty: bool = False) -> ExecSpec:
        rec = self._rec(container_id)
        if rec["state"] != ContainerState.RUNNING.value:
            raise RuntimeErrorStatus("ContainerNotRunning", f"container {rec['name']} is not running")
        spec = container_exec.exec_spec(rec, cmd, ns_init=self._ns_init(rec), fallback_cwd=self._cdir(container_id))
        netns = self.sandboxes.records.get(rec["sandbox_id"], {}).get("netns", "")
        return ExecSpec(CNIPodNetwork.wrap(netns, spec.argv), spec.env, spec.cwd) if netns else spec

    async def exec_sync(self, container_id: str, cmd: Sequence[str], timeout: float) -> ExecResult:
        return await container_exec.run(await self.exec_spec(container_id, cmd), timeout)

    async def port_forward_address(self, sandbox_id: str, port: int) -> tuple[str, int]:
        return self.sandboxes.get(sandbox_id)["ip"] or self.node_ip, port

    def attach_fifo(self, container_id: str) -> str | None:
        """None too once a ``stdinOnce`` container's stdin was closed: later attaches get no stdin."""
        rec = self._rec(container_id)
        if not rec["stdin"] or rec.get("tty") or rec.get("stdin_closed"):
            return None
        return os.path.join(self._cdir(container_id), "stdin.fifo")

    async def close_stdin(self, container_id: str) -> bool:
        """An attach's stdin ended. For a ``stdinOnce`` container that closes the container's stdin
        for good (it reads EOF once the attach has closed its own writer), as containerd does; for
        others nothing happens. A ``tty`` container keeps its terminal (containerd's choice too)."""
        rec = self._rec(container_id)
        if not (rec["stdin"] and rec.get("stdin_once")) or rec.get("tty"):
            return False
        if rec.get("stdin_closed"):
            return True
        rec["stdin_closed"] = True
        self._save(rec)
        if rec["state"] != ContainerState.RUNNING.value:
            return True
        try:
            await asyncio.to_thread(console_holder.close_stdin, self._cdir(container_id))
        except OSError as err:
            logger.warning("stdin of a stdinOnce container not closed", extra={"container": container_id, "error": str(err)})
        return True

    def attach_terminal(self, container_id: str) -> Terminal | None:
        """The running ``tty: true`` container's terminal (None without one, or once adopted)."""
        self._rec(container_id)
        return self._terminals.get(container_id)
