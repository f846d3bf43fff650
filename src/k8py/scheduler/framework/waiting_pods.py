"""Pods held by Permit plugins (``Wait``) until every waiting plugin allows
them, any plugin rejects them, or the shortest timeout passes.

The binding cycle awaits :meth:`WaitingPod.wait`; plugins (or anything else
holding the :class:`WaitingPods` map) call ``allow(plugin)`` / ``reject(plugin,
msg)``. A rejection or timeout is Unschedulable, and the binding cycle then
unreserves and requeues the pod.
"""

from __future__ import annotations

import asyncio

from k8py.scheduler.framework.status import Status, unschedulable
from k8py.scheduler.framework.types import PodInfo

__all__ = ["WaitingPod", "WaitingPods"]


class WaitingPod:
    def __init__(self, pod: PodInfo, plugin_timeouts: dict[str, float]) -> None:
        self.pod = pod
        self.pending = dict(plugin_timeouts)
        self._result: asyncio.Future[Status | None] | None = None
        self._decided: Status | None | bool = False

    def _future(self) -> asyncio.Future[Status | None]:
        if self._result is None:
            self._result = asyncio.get_running_loop().create_future()
            if self._decided is not False:
                self._result.set_result(self._decided)  # type: ignore[arg-type]
        return self._result

    def _decide(self, status: Status | None) -> None:
        if self._decided is not False:
            return
        self._decided = status
        if self._result is not None and not self._result.done():
            self._result.set_result(status)

    def allow(self, plugin: str) -> None:
        self.pending.pop(plugin, None)
        if not self.pending:
            self._decide(None)

    def reject(self, plugin: str, message: str) -> None:
        self._decide(unschedulable(message).with_plugin(plugin))

    async def wait(self) -> Status | None:
        future = self._future()
        timeout = min(self.pending.values()) if self.pending else 0
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            plugin = min(self.pending, key=lambda p: self.pending[p])
            return unschedulable(f"rejected due to timeout after waiting {timeout}s at plugin {plugin}").with_plugin(plugin)


class WaitingPods:
    def __init__(self) -> None:
        self._pods: dict[str, WaitingPod] = {}

    def add(self, pod: WaitingPod) -> None:
        self._pods[pod.pod.uid] = pod

    def get(self, uid: str) -> WaitingPod | None:
        return self._pods.get(uid)

    def remove(self, uid: str) -> None:
        self._pods.pop(uid, None)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(list(self._pods.values()))

    def __len__(self) -> int:
        return len(self._pods)
