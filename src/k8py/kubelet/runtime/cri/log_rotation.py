"""Container log rotation on a CRI runtime (upstream's ``ContainerLogManager``).

On containerd the runtime writes each container's CRI log file and the
kubelet rotates it, as upstream's does: every ``period`` seconds (upstream's
containerLogMonitorInterval, 10 s) each running container's log is looked at;
one larger than ``max_size`` (``containerLogMaxSize``) is renamed
``<log>.<YYYYMMDD-HHMMSS>`` and the runtime is told to open a fresh file
(CRI ``ReopenContainerLog``); if the runtime refuses, the file is renamed back.
Before each rotation the oldest rotated files go, so that at most
``max_files`` (``containerLogMaxFiles``, the live one included) remain, and
the rotated files left are gzip-compressed (``<path>.<stamp>.gz``), so only
the newest rotated file is plain (:mod:`k8py.kubelet.runtime.rotated_logs`,
upstream's ``rotateLog``). The rotated names are the process runtime's
(:mod:`k8py.kubelet.runtime.process.log_pump`); ``kubectl logs`` reads the live file.

Invariant: only the files of the container's own log path are touched
(``<path>``, ``<path>.<stamp>`` and ``<path>.<stamp>.gz``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Callable

from k8py.kubelet.runtime.cri.client import CRIClient, CRIError, pb
from k8py.kubelet.runtime.protocols import NotFoundError
from k8py.kubelet.runtime.rotated_logs import prepare_rotation

__all__ = ["ContainerLogRotation"]

log = logging.getLogger(__name__)


class ContainerLogRotation:
    def __init__(self, client: CRIClient, *, max_size: int, max_files: int, period: float = 10.0,
                 clock: Callable[[], float] = time.time) -> None:
        if max_files < 2:
            raise ValueError(f"containerLogMaxFiles must be at least 2, not {max_files}")
        self.client = client
        self.max_size = max_size
        self.max_files = max_files
        self.period = period
        self.clock = clock
        #: (container id, rotated file) in order (for logs and tests)
        self.rotated: list[tuple[str, str]] = []

    async def run(self) -> None:
        while True:
            try:
                await self.rotate_all()
            except asyncio.CancelledError:
                raise
            except Exception:  # the next round tries again
                log.exception("container log rotation failed")
            await asyncio.sleep(self.period)

    async def rotate_all(self) -> None:
        for c in await self.client.list_containers():
            if c.state != pb.CONTAINER_RUNNING:
                continue
            try:
                path = (await self.client.container_status(c.id)).log_path
            except NotFoundError:
                continue
            try:
                size = os.stat(path).st_size if path else 0
            except FileNotFoundError:
                continue
            if size > self.max_size:
                await self.rotate(c.id, path)

    async def rotate(self, container_id: str, path: str) -> None:
        await asyncio.to_thread(prepare_rotation, path, self.max_files)
        target = f"{path}.{time.strftime('%Y%m%d-%H%M%S', time.gmtime(self.clock()))}"
        if os.path.exists(target) or os.path.exists(target + ".gz"):  # rotated twice within a second: this round waits for the next
            return
        os.rename(path, target)
        try:
            await self.client.reopen_container_log(container_id)
        except (CRIError, NotFoundError) as err:
            os.rename(target, path)  # the runtime still writes the old file: keep it under its name
            log.warning("the runtime would not reopen a container's log", extra={"container": container_id, "error": str(err)})
            return
        self.rotated.append((container_id, target))
        log.debug("container log rotated", extra={"container": container_id, "file": target})
