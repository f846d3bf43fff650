"""The process runtime's images: registry images through the node's puller,
the host-image catalog for everything else.

Which one serves a reference is :meth:`ImagePuller.handles` (an explicit
registry that is not one of the well-known public ones: see
:mod:`k8py.kubelet.images.reference`). The two report themselves apart in
the container status, as the issue asks:

- a pulled image: ``imageID`` is its repo digest
  (``127.0.0.1:5000/app@sha256:<manifest>``), as containerd reports it, and
  the container runs in the image's rootfs;
- a catalog image: ``imageID`` is ``sha256:<recipe hash>`` and the
  container runs over the host's read-only view.

Without a puller (``--no-image-pull``) every image comes from the catalog.
Image GC (:class:`~k8py.kubelet.images.gc.ImageGC`) runs as a task of the
runtime, told which images containers still use.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable, Iterable, Sequence

from k8py.kubelet.images.gc import GCPolicy, ImageGC
from k8py.kubelet.images.puller import ImagePuller
from k8py.kubelet.images.store import ImageRecord
from k8py.kubelet.runtime.process.images import ImageCatalog
from k8py.kubelet.runtime.protocols import Image, ImageSpec

__all__ = ["ProcessImages"]

logger = logging.getLogger(__name__)


def as_image(rec: ImageRecord) -> Image:
    return Image(id=rec.id, repo_tags=list(rec.repo_tags), repo_digests=list(rec.repo_digests), size=rec.size)


class ProcessImages:
    def __init__(self, catalog: ImageCatalog, puller: ImagePuller | None, *, gc_policy: GCPolicy | None = None) -> None:
        self.catalog = catalog
        self.puller = puller
        self.gc_policy = gc_policy or GCPolicy()
        self._pulled: set[str] = set()
        self._gc_task: asyncio.Task[None] | None = None
        self.gc: ImageGC | None = None

    def is_oci(self, image: str) -> bool:
        return self.puller is not None and self.puller.handles(image)

    def start_gc(self, in_use: Callable[[], Iterable[str]]) -> None:
        if self.puller is None or self._gc_task is not None:
            return
        self.gc = ImageGC(self.puller, self.gc_policy, in_use=in_use)
        self._gc_task = asyncio.create_task(self.gc.run(), name="image-gc")

    async def close(self) -> None:
        if self._gc_task is not None:
            self._gc_task.cancel()
            try:
                await self._gc_task
            except asyncio.CancelledError:
                pass
            self._gc_task = None
        if self.puller is not None:
            await self.puller.close()

    def remember(self, images: Iterable[str]) -> None:
        """Catalog images that containers on disk use count as pulled (after a restart)."""
        self._pulled |= {i for i in images if not self._safe_is_oci(i)}

    def _safe_is_oci(self, image: str) -> bool:
        try:
            return self.is_oci(image)
        except Exception:
            return False

    def record(self, image: str) -> ImageRecord | None:
        assert self.puller is not None
        return self.puller.status(image)

    async def pull(self, spec: ImageSpec) -> str:
        if self.is_oci(spec.image):
            assert self.puller is not None
            return (await self.puller.pull(spec.image, spec.auth)).id
        image = self.catalog.image_for(spec.image)
        self._pulled.add(spec.image)
        return image.id

    async def status(self, spec: ImageSpec) -> Image | None:
        if self.is_oci(spec.image):
            rec = self.record(spec.image)
            return as_image(rec) if rec is not None else None
        return self.catalog.image_for(spec.image) if spec.image in self._pulled else None

    async def list(self) -> Sequence[Image]:
        out = [as_image(r) for r in self.puller.list()] if self.puller is not None else []
        for name in sorted(self._pulled):
            try:
                out.append(self.catalog.image_for(name))
            except Exception:
                continue
        return out

    async def remove(self, spec: ImageSpec) -> None:
        if self.is_oci(spec.image) or (self.puller is not None and spec.image in self.puller.store.records):
            assert self.puller is not None
            await self.puller.remove(spec.image)
            return
        self._pulled.discard(spec.image)
