"""Image garbage collection on a CRI runtime, by disk thresholds (upstream's ``realImageGCManager`` over CRI).

The process runtime collects its own content store (:mod:`k8py.kubelet.images.gc`);
on containerd the images are the runtime's, so the kubelet collects them as
upstream's does, through the ImageService:

- every ``policy.period`` seconds, ``ListImages`` and ``ListContainers``
  (created, running and exited containers all count) update what this GC
  knows of each image: when it was first seen, when last seen in use;
- the usage of the image filesystem (``ImageFsInfo``'s mountpoint, its
  capacity and free bytes as the kernel reports them) is compared with
  ``policy.high_percent``; at or above it, images are removed
  (``RemoveImage``) until ``policy.low_percent`` would be reached, counting
  each image's ``size`` as freed;
- candidates: images no container uses, not pinned (``Image.pinned``, what
  containerd 1.7 sets on its sandbox image; containerd 1.6 does not, so its
  sandbox image, read from its ``Status`` info, is kept too), first seen at
  least ``policy.min_age`` ago; least recently used first, then oldest.

``usage`` (capacity, available bytes) and ``clock`` are injectable, so tests
drive a full disk without filling one. State is in memory: a kubelet that
restarts sees every image as new (upstream's does the same).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from dataclasses import dataclass
from typing import Callable

from k8py.kubelet.images.gc import GCPolicy, disk_usage
from k8py.kubelet.runtime.cri.client import CRIClient, CRIError, pb
from k8py.kubelet.runtime.protocols import NotFoundError

__all__ = ["CRIImageGC", "ImageUse", "removal_order"]

log = logging.getLogger(__name__)


@dataclass
class ImageUse:
    """What the GC knows of one image: when it first saw it, when it last saw a container use it (0: never)."""

    id: str
    size: int
    first_seen: float
    last_used: float = 0.0


def removal_order(candidates: list[ImageUse]) -> list[ImageUse]:
    """Least recently used first (never used counts as used when first seen), then the oldest, then by ID."""
    return sorted(candidates, key=lambda u: (u.last_used or u.first_seen, u.first_seen, u.id))


class CRIImageGC:
    def __init__(self, client: CRIClient, policy: GCPolicy, *, usage: Callable[[str], tuple[int, int]] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.client = client
        self.policy = policy
        #: (capacity, available) bytes of the filesystem at a mountpoint
        self.usage = usage or disk_usage
        self.clock = clock
        self.images: dict[str, ImageUse] = {}
        #: image IDs removed, in order (for logs and tests)
        self.removed: list[str] = []
        self._sandbox_image: str | None = None

    async def run(self) -> None:
        while True:
            try:
                await self.collect()
            except asyncio.CancelledError:
                raise
            except Exception:  # a failed round must not stop the next one
                log.exception("image garbage collection on the CRI runtime failed")
            await asyncio.sleep(self.policy.period)

    async def _kept_names(self) -> set[str]:
        """The runtime's sandbox image (containerd's CRI config), which no GC may remove."""
        if self._sandbox_image is None:
            try:
                info = (await self.client.status(verbose=True)).info
                self._sandbox_image = str(json.loads(info.get("config") or "{}").get("sandboxImage") or "")
            except (CRIError, ValueError) as err:
                log.debug("the runtime did not say which sandbox image it uses: %s", err)
                self._sandbox_image = ""
        return {self._sandbox_image} if self._sandbox_image else set()

    async def detect(self) -> tuple[list[pb.Image], set[str]]:
        """Update first-seen and last-used times; returns the images and the IDs of those containers use."""
        now = self.clock()
        images = await self.client.list_images()
        containers = await self.client.list_containers()
        names = {c.image.image for c in containers} | {c.image_ref for c in containers}
        in_use = {i.id for i in images if i.id in names or names & set(i.repo_tags) or names & set(i.repo_digests)}
        for img in images:
            use = self.images.setdefault(img.id, ImageUse(img.id, img.size, now))
            use.size = img.size
            if img.id in in_use:
                use.last_used = now
        for gone in self.images.keys() - {i.id for i in images}:
            del self.images[gone]
        return images, in_use

    async def collect(self) -> int:
        """One round; returns the bytes freed (as the runtime sizes the images removed)."""
        images, in_use = await self.detect()
        filesystems = await self.client.image_fs_info()
        mount = next((f.fs_id.mountpoint for f in filesystems if f.fs_id.mountpoint), "")
        if not mount or not os.path.exists(mount):
            return 0
        capacity, available = self.usage(mount)
        if capacity <= 0:
            return 0
        used_pct = (capacity - available) * 100 / capacity
        if used_pct < self.policy.high_percent:
            return 0
        want = (capacity - available) - capacity * self.policy.low_percent // 100
        log.info("image GC: the image filesystem is above the high threshold",
                 extra={"usage_percent": round(used_pct, 1), "high": self.policy.high_percent, "to_free": want})
        kept = await self._kept_names()
        now = self.clock()
        candidates = [self.images[i.id] for i in images
                      if i.id not in in_use and not i.pinned and not kept & set(i.repo_tags)
                      and now - self.images[i.id].first_seen >= self.policy.min_age]
        freed = 0
        for use in removal_order(candidates):
            if freed >= want:
                break
            try:
                await self.client.remove_image(use.id)
            except NotFoundError:
                pass  # removed meanwhile: nothing was freed by us
            except CRIError as err:  # e.g. a container was created from it since the listing
                log.warning("image GC could not remove an image", extra={"image": use.id, "error": err.details})
                continue
            else:
                freed += use.size
            self.removed.append(use.id)
            self.images.pop(use.id, None)
            log.info("image GC removed an image", extra={"image": use.id, "bytes": use.size})
        if freed < want:
            log.warning("image GC could not free enough space", extra={"wanted": want, "freed": freed})
        return freed
