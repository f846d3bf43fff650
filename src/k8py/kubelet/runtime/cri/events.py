"""Container events from a CRI runtime: its ``GetContainerEvents`` stream, with relisting as the fallback.

Upstream's evented PLEG, in the runtime adapter: :meth:`ContainerEvents.events`
yields a :class:`~k8py.kubelet.runtime.protocols.ContainerEvent` for every
container that was created, started, stopped or deleted, from two sources:

- the runtime's event stream (CRI ``GetContainerEvents``; containerd 1.7+):
  an exit reaches the PLEG the moment the runtime sees it (the stream counts
  as open once the runtime has not refused it for a second: containerd sends
  its response headers only with the first event);
- relisting (upstream's *generic* PLEG): ``ListPodSandbox`` + ``ListContainers``
  and a diff against the states seen last (a sandbox counts as a container of
  its pod: ready is running, not ready exited, as upstream's relist has it;
  containerd 1.7's stream reports a sandbox's exit with the sandbox's ID too). It runs every ``poll_interval``
  seconds while there is no stream (the runtime answers ``UNIMPLEMENTED``, as
  Debian's containerd 1.6 does, or the stream is broken), and every
  ``evented_relist_period`` seconds beside a working stream, as a safety net
  (upstream: 300 s). Right after a stream breaks one relist catches up on what
  was missed, then the stream is tried again after a second (relisting meanwhile);
- without a CRI stream, containerd's own event service (``Events/Subscribe``,
  task exits and OOM kills in the CRI plugin's namespace) makes a relist run
  at once, so an exit still reaches the PLEG without waiting for the period
  (a runtime that is not containerd answers ``UNIMPLEMENTED``: the period
  alone then).

Invariants: the states seen are updated by both sources, so one change is
reported once by whichever sees it first (a relist racing a stream event may
report it twice: the PLEG only wakes the pod's worker, which is idempotent);
the first relist reports every container present (a kubelet that starts
syncs them all); ``CancelledError`` ends both tasks and the generator.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import AsyncIterator, Callable

import grpc

from k8py.kubelet.runtime.cri.client import CRIClient, CRIError, pb
from k8py.kubelet.runtime.protocols import ContainerEvent, ContainerEventType

__all__ = ["ContainerEvents"]

log = logging.getLogger(__name__)

_FROM_STATE = {pb.CONTAINER_CREATED: ContainerEventType.CREATED, pb.CONTAINER_RUNNING: ContainerEventType.STARTED,
               pb.CONTAINER_EXITED: ContainerEventType.STOPPED}
_FROM_EVENT = {pb.CONTAINER_CREATED_EVENT: ContainerEventType.CREATED, pb.CONTAINER_STARTED_EVENT: ContainerEventType.STARTED,
               pb.CONTAINER_STOPPED_EVENT: ContainerEventType.STOPPED, pb.CONTAINER_DELETED_EVENT: ContainerEventType.DELETED}
#: a sandbox's state as the container state it is relisted as
_SANDBOX_STATE = {pb.SANDBOX_READY: pb.CONTAINER_RUNNING, pb.SANDBOX_NOTREADY: pb.CONTAINER_EXITED}
#: the container state an event leaves behind (None: the container is gone)
_STATE_AFTER = {ContainerEventType.CREATED: pb.CONTAINER_CREATED, ContainerEventType.STARTED: pb.CONTAINER_RUNNING,
                ContainerEventType.STOPPED: pb.CONTAINER_EXITED, ContainerEventType.DELETED: None}


#: seconds before a broken stream is taken again (at most; sooner with a shorter poll_interval)
RESUBSCRIBE_AFTER = 1.0
#: seconds between the extra relists after a containerd task event (its CRI plugin records it a moment later)
NUDGE_FOLLOWUPS = (0.05, 0.2, 0.5, 1.0, 2.0)


class ContainerEvents:
    def __init__(self, client: CRIClient, *, poll_interval: float = 1.0, evented_relist_period: float = 300.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.client = client
        self.poll_interval = poll_interval
        self.evented_relist_period = evented_relist_period
        self._clock = clock
        #: "unknown" until the runtime answers, then "evented" (a stream is open) or "relist"
        self.mode = "unknown"
        self._mode_changed = asyncio.Event()
        self._relist_now = asyncio.Event()
        self._seen: dict[str, tuple[int, str, str]] = {}  # container id -> (state, sandbox id, pod uid)

    def _set_mode(self, mode: str) -> None:
        if mode != self.mode:
            log.info("container events: %s", {"evented": "the runtime's event stream (GetContainerEvents)",
                                               "relist": f"relisting every {self.poll_interval:g} s"}.get(mode, mode))
            self.mode = mode
            self._mode_changed.set()

    async def events(self) -> AsyncIterator[ContainerEvent]:
        queue: asyncio.Queue[ContainerEvent] = asyncio.Queue()
        tasks = [asyncio.create_task(self._relist_loop(queue), name="cri-events-relist"),
                 asyncio.create_task(self._stream_loop(queue), name="cri-events-stream"),
                 asyncio.create_task(self._nudge_loop(), name="cri-events-containerd")]
        watched = set(tasks)
        try:
            while True:
                get = asyncio.ensure_future(queue.get())
                done, _ = await asyncio.wait([get, *watched], return_when=asyncio.FIRST_COMPLETED)
                for task in done - {get}:
                    task.result()  # a loop that failed fails the generator (the kubelet says why)
                    if task is tasks[0]:
                        raise RuntimeError("relisting containers stopped")
                    watched.discard(task)  # the stream loop returns when the runtime has no stream, the nudges when
                    # the runtime is not containerd
                if get not in done:
                    get.cancel()
                    continue
                yield get.result()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    # --- the runtime's stream -------------------------------------------------------------

    async def _stream_loop(self, queue: asyncio.Queue[ContainerEvent]) -> None:
        while True:
            try:
                async for response in self.client.container_events(on_open=lambda: self._set_mode("evented")):
                    self._set_mode("evented")
                    event = self._from_response(response)
                    if event is not None:
                        queue.put_nowait(event)
                log.warning("the runtime ended its container event stream; relisting, then subscribing again")
            except CRIError as e:
                if e.code == grpc.StatusCode.UNIMPLEMENTED:
                    self._set_mode("relist")
                    return  # this runtime has no stream (containerd < 1.7): relisting from now on
                log.warning("container event stream failed (%s); relisting, then subscribing again", e)
            self._set_mode("relist")
            await self._relist(queue)
            await asyncio.sleep(min(self.poll_interval, RESUBSCRIBE_AFTER))

    def _from_response(self, r: pb.ContainerEventResponse) -> ContainerEvent | None:
        kind = _FROM_EVENT.get(r.container_event_type)
        if kind is None or not r.container_id:
            return None
        before = self._seen.get(r.container_id)
        sandbox_id = r.pod_sandbox_status.id or (before[1] if before else "")
        uid = r.pod_sandbox_status.metadata.uid or (before[2] if before else "")
        state = _STATE_AFTER[kind]
        if state is None:
            self._seen.pop(r.container_id, None)
        else:
            self._seen[r.container_id] = (state, sandbox_id, uid)
        return ContainerEvent(kind, r.container_id, sandbox_id, uid, r.created_at / 1e9 if r.created_at else self._clock())

    # --- relisting ------------------------------------------------------------------------

    async def _relist_loop(self, queue: asyncio.Queue[ContainerEvent]) -> None:
        followups: list[float] = []
        while True:
            self._mode_changed.clear()
            self._relist_now.clear()
            await self._relist(queue)
            period = self.evented_relist_period if self.mode == "evented" else self.poll_interval
            if followups:
                period = min(period, followups.pop(0))
            waits = [asyncio.ensure_future(self._mode_changed.wait()), asyncio.ensure_future(self._relist_now.wait())]
            try:  # a change of source changes the period at once; a nudge relists at once
                await asyncio.wait(waits, timeout=period, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()
            if self._relist_now.is_set():
                # containerd publishes a task's exit before its CRI plugin records it: look again a few
                # times shortly after (what the first look finds may be another change)
                followups = list(NUDGE_FOLLOWUPS)

    async def _nudge_loop(self) -> None:
        """Without a CRI event stream, containerd's own task events (exits, OOM kills) trigger a relist at once."""
        while self.mode != "relist":
            self._mode_changed.clear()
            await self._mode_changed.wait()
        while True:
            try:
                async for _ in self.client.containerd_task_events():
                    if self.mode == "relist":
                        self._relist_now.set()
            except CRIError as e:
                if e.code in (grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.PERMISSION_DENIED):
                    return  # not containerd: relisting on the period alone
                log.debug("containerd's event subscription failed (%s); subscribing again", e)
            await asyncio.sleep(min(self.poll_interval, RESUBSCRIBE_AFTER))

    async def _relist(self, queue: asyncio.Queue[ContainerEvent]) -> None:
        try:
            sandboxes = await self.client.list_pod_sandbox()
            uids = {s.id: s.metadata.uid for s in sandboxes}
            now = {c.id: (c.state, c.pod_sandbox_id, uids.get(c.pod_sandbox_id, "")) for c in await self.client.list_containers()}
            # as upstream's generic PLEG, a sandbox counts as one of its pod's containers: a pause that dies
            # wakes the pod's worker (which makes a new sandbox), though no container changed
            now.update({s.id: (_SANDBOX_STATE[s.state], s.id, s.metadata.uid) for s in sandboxes if s.state in _SANDBOX_STATE})
        except CRIError as e:
            log.warning("relisting containers failed: %s", e)
            return
        at = self._clock()
        for cid, (state, sid, uid) in now.items():
            if self._seen.get(cid, (None,))[0] != state and state in _FROM_STATE:
                queue.put_nowait(ContainerEvent(_FROM_STATE[state], cid, sid, uid, at))
        for cid in self._seen.keys() - now.keys():
            _, sid, uid = self._seen[cid]
            queue.put_nowait(ContainerEvent(ContainerEventType.DELETED, cid, sid, uid, at))
        self._seen = now
