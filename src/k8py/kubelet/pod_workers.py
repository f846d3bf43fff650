"""Pod workers: one asyncio worker per pod, the source of truth for where a
pod is in its life on this node (upstream's ``pod_workers.go``).

Each worker walks syncing → terminating → terminated → (cleaned up, gone):

- **syncing**: every wake-up (a pod update from the API, a container event
  from the PLEG, a probe result, a back-off timer) runs one ``sync_pod``,
  which computes the actions and carries them out; it may ask to be woken
  again after a delay. A pod that reaches a terminal phase, is being
  deleted, or vanished from the API goes to terminating.
- **terminating**: ``terminate_pod`` stops every container (preStop,
  SIGTERM, grace, SIGKILL) and the sandbox, and writes the final status.
- **terminated**: the status manager is told, so a pod being deleted is
  finished with grace 0 once its final status is written. The worker then
  waits for the pod to leave the API, cleans up (sandbox, logs, volumes)
  and ends.

Wake-ups coalesce (one Event per worker): a burst of updates is one sync.
Only the worker touches its pod's containers, so syncs of one pod never
overlap; different pods sync concurrently.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["WorkState", "PodWorker", "PodWorkers", "PodSyncer"]

logger = logging.getLogger(__name__)


class WorkState(str, enum.Enum):
    SYNCING = "syncing"
    TERMINATING = "terminating"
    TERMINATED = "terminated"


@dataclass(eq=False)
class PodWorker:
    """One pod's worker and the kubelet's memory of that pod."""

    uid: str
    pod: dict[str, Any]
    state: WorkState = WorkState.SYNCING
    removed: bool = False
    sandbox_id: str = ""
    #: container name -> (reason, message) while it cannot run
    waiting: dict[str, tuple[str, str]] = field(default_factory=dict)
    initialized: bool = False
    terminal_phase: str = ""
    reason: str = ""
    message: str = ""
    start_time: str = ""
    wake_event: asyncio.Event = field(default_factory=asyncio.Event)
    timer: asyncio.TimerHandle | None = None
    task: asyncio.Task[None] | None = None
    #: anything the syncer wants to remember per pod (prober keys, hook state)
    memo: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        m = self.pod["metadata"]
        return f"{m.get('namespace', 'default')}/{m['name']}"

    def wake(self) -> None:
        self.wake_event.set()

    def wake_after(self, delay: float) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer = asyncio.get_running_loop().call_later(max(0.0, delay), self.wake_event.set)


class PodSyncer(Protocol):
    async def sync_pod(self, worker: PodWorker) -> float | None:
        """One sync; returns seconds until the next wanted wake-up, or None."""

    async def terminate_pod(self, worker: PodWorker) -> None: ...

    def terminated(self, worker: PodWorker) -> None:
        """Tell the status manager the pod is stopped on this node."""

    async def cleanup_pod(self, worker: PodWorker) -> None: ...


def _should_terminate(w: PodWorker) -> bool:
    return w.removed or bool(w.pod["metadata"].get("deletionTimestamp")) or bool(w.terminal_phase)


class PodWorkers:
    def __init__(self, syncer: PodSyncer) -> None:
        self.syncer = syncer
        self.workers: dict[str, PodWorker] = {}
        self._group: asyncio.TaskGroup | None = None

    def update_pod(self, pod: dict[str, Any]) -> None:
        uid = pod["metadata"]["uid"]
        w = self.workers.get(uid)
        if w is None:
            w = self.workers[uid] = PodWorker(uid, pod)
            if self._group is not None:
                self._start(w)
        else:
            w.pod = pod
        w.wake()

    def remove_pod(self, pod: dict[str, Any]) -> None:
        w = self.workers.get(pod["metadata"]["uid"])
        if w is not None:
            w.removed = True
            w.pod = pod
            w.wake()

    def wake(self, uid: str) -> None:
        w = self.workers.get(uid)
        if w is not None:
            w.wake()

    def _start(self, w: PodWorker) -> None:
        assert self._group is not None
        w.task = self._group.create_task(self._work(w), name=f"pod-worker-{w.key}")

    def attach(self, group: asyncio.TaskGroup) -> None:
        """Run the workers as tasks of ``group`` (the simulated nodes share one group: no task a node)."""
        self._group = group
        for w in list(self.workers.values()):
            if w.task is None:
                self._start(w)

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            self.attach(tg)
            await asyncio.Event().wait()

    async def _work(self, w: PodWorker) -> None:
        try:
            while True:
                await w.wake_event.wait()
                w.wake_event.clear()
                try:
                    done = await self._step(w)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    logger.exception("pod sync failed; retrying", extra={"pod": w.key})
                    w.wake_after(1.0)
                    continue
                if done:
                    return
        finally:
            if w.timer is not None:
                w.timer.cancel()

    async def _step(self, w: PodWorker) -> bool:
        if w.state is WorkState.SYNCING and not _should_terminate(w):
            delay = await self.syncer.sync_pod(w)
            if not _should_terminate(w):
                if delay is not None:
                    w.wake_after(delay)
                return False
        if w.state is WorkState.SYNCING:
            w.state = WorkState.TERMINATING
        if w.state is WorkState.TERMINATING:
            await self.syncer.terminate_pod(w)
            w.state = WorkState.TERMINATED
        self.syncer.terminated(w)
        if w.removed:
            await self.syncer.cleanup_pod(w)
            self.workers.pop(w.uid, None)
            return True
        return False
