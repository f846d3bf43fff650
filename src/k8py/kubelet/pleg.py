"""The pod lifecycle event generator: container changes → pod wake-ups.

Upstream's evented PLEG: the runtime pushes container events
(``ContainerRuntime.container_events``) and each becomes a wake-up of the
pod's worker, with no polling delay. A relist every ``relist_period``
seconds (the kubelet's syncFrequency, 1 min) also wakes every worker, as a safety net against a
missed event; it does not call the runtime.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable, Iterable

from k8py.kubelet.runtime.protocols import ContainerRuntime

__all__ = ["PLEG"]

logger = logging.getLogger(__name__)


class PLEG:
    def __init__(self, runtime: ContainerRuntime, *, wake: Callable[[str], None], all_pods: Callable[[], Iterable[str]],
                 relist_period: float = 30.0, on_event: Callable[[], None] | None = None) -> None:
        self.runtime = runtime
        self.wake = wake
        self.all_pods = all_pods
        self.relist_period = relist_period
        self.events = 0
        self._on_event = on_event

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self._relist(), name="pleg-relist")
            async for event in self.runtime.container_events():
                self.events += 1
                if self._on_event is not None:
                    self._on_event()
                self.wake(event.pod_uid)

    async def _relist(self) -> None:
        while True:
            await asyncio.sleep(self.relist_period)
            for uid in list(self.all_pods()):
                self.wake(uid)
