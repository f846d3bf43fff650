"""Image garbage collection by disk thresholds (upstream's ``ImageGCManager``).

Every ``period`` seconds (upstream: 5 minutes) the usage of the filesystem
holding the content store is read. When it is at or above
``high_percent`` (``imageGCHighThresholdPercent``, default 85), images are
removed until usage would be at ``low_percent``
(``imageGCLowThresholdPercent``, default 80): only images no container
uses (created, running or exited containers all count, as upstream), not
pulled more recently than ``min_age`` (``imageMinimumGCAge``, 2 minutes),
least recently used first. The bytes an image frees are its rootfs and
the blobs no other image shares, measured on disk.

``usage`` (capacity, available bytes) and ``clock`` are injectable, so
tests drive a "full disk" without filling one.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass
from typing import Callable, Iterable

from k8py.kubelet.images.puller import ImagePuller
from k8py.kubelet.images.unpack import dir_size

__all__ = ["ImageGC", "GCPolicy", "disk_usage"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class GCPolicy:
    high_percent: int = 85
    low_percent: int = 80
    min_age: float = 120.0
    period: float = 300.0

    def __post_init__(self) -> None:
        if not 0 <= self.low_percent <= self.high_percent <= 100:
            raise ValueError(f"imageGCLowThresholdPercent ({self.low_percent}) must be at most imageGCHighThresholdPercent "
                             f"({self.high_percent}), both within 0-100")


def disk_usage(path: str) -> tuple[int, int]:
    st = os.statvfs(path)
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


class ImageGC:
    def __init__(self, puller: ImagePuller, policy: GCPolicy, *, in_use: Callable[[], Iterable[str]],
                 usage: Callable[[], tuple[int, int]] | None = None, clock: Callable[[], float] = time.time) -> None:
        self.puller = puller
        self.policy = policy
        self.in_use = in_use
        self.usage = usage or (lambda: disk_usage(puller.store.root))
        self.clock = clock
        #: image ids removed, in order (for logs and tests)
        self.removed: list[str] = []

    async def run(self) -> None:
        while True:
            try:
                await self.collect()
            except asyncio.CancelledError:
                raise
            except Exception:  # a failed round must not stop the next one
                logger.exception("image garbage collection failed")
            await asyncio.sleep(self.policy.period)

    async def collect(self) -> int:
        """One round; returns the bytes freed."""
        capacity, available = self.usage()
        if capacity <= 0:
            return 0
        used_pct = (capacity - available) * 100 / capacity
        if used_pct < self.policy.high_percent:
            return 0
        want = (capacity - available) - capacity * self.policy.low_percent // 100
        logger.info("image GC: disk usage above the high threshold", extra={"usage_percent": round(used_pct, 1),
                                                                             "high": self.policy.high_percent, "to_free": want})
        used = set(self.in_use())
        now = self.clock()
        candidates = [r for r in self.puller.list()
                      if r.id not in used and r.id not in self.puller.busy and now - r.pulled_at >= self.policy.min_age]
        candidates.sort(key=lambda r: (r.last_used or r.pulled_at, r.id))
        freed = 0
        for rec in candidates:
            if freed >= want:
                break
            size = await asyncio.to_thread(self._bytes, rec.id)
            await self.puller.remove(rec.id)
            self.removed.append(rec.id)
            freed += size
            logger.info("image GC removed an image", extra={"image": rec.id, "tags": rec.repo_tags, "bytes": size})
        if freed < want:
            logger.warning("image GC could not free enough space", extra={"wanted": want, "freed": freed})
        return freed

    def _bytes(self, image_id: str) -> int:
        store = self.puller.store
        rec = store.records.get(image_id)
        if rec is None:
            return 0
        shared = {b for r in store.records.values() if r.id != image_id for b in r.blobs}
        total = dir_size(store.rootfs(image_id))
        for b in rec.blobs:
            if b not in shared:
                try:
                    total += os.stat(store.blob_path(b)).st_blocks * 512
                except FileNotFoundError:
                    pass
        return total
